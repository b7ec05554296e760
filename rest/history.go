package rest

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

var errNoHistory = &Error{Status: http.StatusServiceUnavailable, Code: "no_history", Message: "no call history is configured"}

func (h *handler) registerHistory() {
	h.handle("GET /historycall/interval/user/{username}/{from}/{to}", false, h.histUser(false))
	h.handle("GET /historycall/interval/user/{username}/{from}/{to}/csv", false, h.histUser(true))
	h.handle("GET /histcallswitch/interval/{from}/{to}", false, h.histSwitch(false))
	h.handle("GET /histcallswitch/interval/{from}/{to}/csv", false, h.histSwitch(true))
}

func historyInvalid(err error) bool { return history.IsInvalid(err) }

// window parses the {from} and {to} dates (YYYYMMDD, both days included)
// in the configured time zone.
func (h *handler) window(r *http.Request) (time.Time, time.Time, error) {
	loc := h.cfg.HistoryLocation
	if loc == nil {
		loc = time.Local
	}
	from, err := time.ParseInLocation("20060102", r.PathValue("from"), loc)
	if err != nil {
		return time.Time{}, time.Time{}, badRequest("from: want a date YYYYMMDD")
	}
	to, err := time.ParseInLocation("20060102", r.PathValue("to"), loc)
	if err != nil {
		return time.Time{}, time.Time{}, badRequest("to: want a date YYYYMMDD")
	}
	if to.Before(from) {
		return time.Time{}, time.Time{}, badRequest("to is before from")
	}
	return from, to.AddDate(0, 0, 1), nil
}

// histQuery builds the query shared by the JSON and CSV variants.
func (h *handler) histQuery(r *http.Request) (history.Query, error) {
	from, to, err := h.window(r)
	if err != nil {
		return history.Query{}, err
	}
	q := r.URL.Query()
	limit, err := intParam(r, "limit", history.DefaultLimit)
	if err != nil {
		return history.Query{}, err
	}
	return history.Query{From: from, To: to, Direction: q.Get("direction"), Text: q.Get("text"),
		Limit: limit, Cursor: q.Get("cursor")}, nil
}

func (h *handler) histUser(csv bool) endpoint {
	return func(w http.ResponseWriter, r *http.Request, u *auth.User) int {
		if h.cfg.History == nil {
			return writeError(w, h.log, r, errNoHistory)
		}
		target, err := h.historyOf(u, r.PathValue("username"))
		if err != nil {
			return writeError(w, h.log, r, err)
		}
		q, err := h.histQuery(r)
		if err != nil {
			return writeError(w, h.log, r, err)
		}
		q.User, q.Viewer = target.Username, u.Username
		q.Extensions = slices.Clone(target.Endpoints)
		if q.Extensions == nil {
			q.Extensions = []string{}
		}
		if target != u {
			q.PBXs = historyPBXs(u) // one's own: one's endpoints already
		}
		return h.histServe(w, r, q, csv)
	}
}

// historyOf is the user whose history u asks for, if u may read it: its
// own with the history_personal capability, a user sharing a group with
// history_group, anyone's with history_switchboard.
func (h *handler) historyOf(u *auth.User, name string) (*auth.User, error) {
	if name == u.Username {
		if !auth.Allowed(u, auth.PersonalHistory, "") {
			return nil, forbidden("your profile does not include reading your call history")
		}
		return u, nil
	}
	sw, grp := auth.Allowed(u, auth.SwitchboardHistory, ""), auth.Allowed(u, auth.GroupHistory, "")
	if !sw && !grp {
		return nil, forbidden("you may read only your own call history")
	}
	t, ok := h.auth.Users().Lookup(name)
	if !ok || (!sw && !slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(t.Groups, g) })) {
		if !sw {
			return nil, forbidden("you may read the call history of your groups' users only")
		}
		return nil, notFound("no user %s", name)
	}
	return t, nil
}

func (h *handler) histSwitch(csv bool) endpoint {
	return func(w http.ResponseWriter, r *http.Request, u *auth.User) int {
		if h.cfg.History == nil {
			return writeError(w, h.log, r, errNoHistory)
		}
		if !auth.Allowed(u, auth.SwitchboardHistory, "") {
			return writeError(w, h.log, r, forbidden("the switchboard history needs the %s permission", auth.PermSwitchboardHistory))
		}
		q, err := h.histQuery(r)
		if err != nil {
			return writeError(w, h.log, r, err)
		}
		q.Viewer, q.PBXs = u.Username, historyPBXs(u)
		return h.histServe(w, r, q, csv)
	}
}

var hdrCSV = []string{"text/csv; charset=utf-8"}

func (h *handler) histServe(w http.ResponseWriter, r *http.Request, q history.Query, csv bool) int {
	if !csv {
		p, err := h.cfg.History.Calls(r.Context(), q)
		if err != nil {
			return writeError(w, h.log, r, storeError(err))
		}
		h.ownNames(q, p.Rows)
		return writeJSON(w, http.StatusOK, p)
	}
	// Check the query before the 200 goes out; errors after it can
	// only cut the stream short.
	probe := q
	if err := h.cfg.History.Export(r.Context(), probe, func(history.CDR) error { return errProbe }); err != nil && !errors.Is(err, errProbe) {
		return writeError(w, h.log, r, storeError(err))
	}
	hd := w.Header()
	hd["Content-Type"] = hdrCSV
	hd["Cache-Control"] = hdrNoStore
	hd.Set("Content-Disposition", `attachment; filename="history.csv"`)
	w.WriteHeader(http.StatusOK)
	var names func(string) string
	if h.cfg.Phonebook != nil {
		names = h.cfg.Phonebook.Lookup
		if own, ok := h.cfg.Phonebook.(ownNamer); ok && q.User != "" && q.User == q.Viewer {
			names = func(n string) string { return own.LookupFor(q.Viewer, n) }
		}
	}
	if err := history.ExportCSV(r.Context(), h.cfg.History, q, w, h.cfg.HistoryLocation, names, 0); err != nil {
		h.log.Warn("history csv export cut short", "path", r.URL.Path, "err", err)
	}
	return http.StatusOK
}

var errProbe = errors.New("probe")

// ownNamer is a phonebook that knows each user's own contacts
// (*phonebook.Book).
type ownNamer interface {
	LookupOwn(user, number string) string
	LookupFor(user, number string) string
}

// ownNames names the numbers of a user's own history by her own contacts
// (private, speed dial): they win over the public phonebook's names, not
// over a caller ID name the PBX recorded. Other people's and the
// switchboard's history keep the public names: private contacts are seen
// by their owner only.
func (h *handler) ownNames(q history.Query, rows []history.Call) {
	own, ok := h.cfg.Phonebook.(ownNamer)
	if !ok || q.User == "" || q.User != q.Viewer {
		return
	}
	for i := range rows {
		c := &rows[i]
		if n := own.LookupOwn(q.Viewer, c.Src); n != "" && (c.CNAM == "" || c.CNAM == c.Src || c.CNAM == h.cfg.Phonebook.Lookup(c.Src)) {
			c.CNAM = n
		}
		if n := own.LookupOwn(q.Viewer, c.Dst); n != "" {
			c.DstCNAM = n
		}
	}
}

// historyPBXs is history.Query.PBXs for u: the PBXs a user limited to
// some may read the calls of ("" the default PBX), nil for every PBX.
func historyPBXs(u *auth.User) []string {
	if !u.PBXLimited() {
		return nil
	}
	out := []string{}
	for _, p := range u.PBXs {
		if p == calls.DefaultPBXName {
			p = ""
		}
		out = append(out, p)
	}
	return out
}
