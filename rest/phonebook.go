package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
)

// Phonebook is what the /phonebook routes and the history CSV names
// need: *phonebook.Book and *phonebook.Remote satisfy it.
type Phonebook interface {
	Search(ctx context.Context, a phonebook.Actor, term string, limit, offset int) (phonebook.Page, error)
	Get(ctx context.Context, a phonebook.Actor, id int64) (phonebook.Contact, error)
	LookupContacts(ctx context.Context, a phonebook.Actor, number string) ([]phonebook.Contact, error)
	Create(ctx context.Context, a phonebook.Actor, c phonebook.Contact) (phonebook.Contact, error)
	Modify(ctx context.Context, a phonebook.Actor, c phonebook.Contact) (phonebook.Contact, error)
	Delete(ctx context.Context, a phonebook.Actor, id int64) error
	Import(ctx context.Context, a phonebook.Actor, r io.Reader, opt phonebook.ImportOptions) (phonebook.ImportReport, error)
	// Lookup names a number without blocking ("" when unknown).
	Lookup(number string) string
}

var (
	_ Phonebook = (*phonebook.Book)(nil)
	_ Phonebook = (*phonebook.Remote)(nil)
)

// MaxImport is the largest CSV body accepted by POST /phonebook/import.
const MaxImport = 16 << 20

var errNoPhonebook = &Error{Status: http.StatusServiceUnavailable, Code: "no_phonebook", Message: "no phonebook is configured"}

func (h *handler) registerPhonebook() {
	h.handle("GET /phonebook/search/{term}", false, h.pbSearch)
	h.handle("GET /phonebook/contact/{id}", false, h.pbGet)
	h.handle("GET /phonebook/lookup/{number}", false, h.pbLookup)
	h.handle("POST /phonebook/create", false, h.pbCreate)
	h.handle("POST /phonebook/modify_cticontact", false, h.pbModify)
	h.handle("POST /phonebook/delete_cticontact", false, h.pbDelete)
	h.handle("POST /phonebook/import", false, h.pbImport)
}

func actor(u *auth.User) phonebook.Actor {
	return phonebook.Actor{User: u.Username, Admin: auth.Allowed(u, auth.PhonebookWrite, "")}
}

// storeError maps phonebook and history errors to API errors.
func storeError(err error) error {
	var ie *phonebook.InvalidError
	var ce *phonebook.CSVError
	switch {
	case errors.Is(err, phonebook.ErrNotFound):
		return notFound("no such contact")
	case errors.Is(err, phonebook.ErrForbidden):
		return forbidden("you may not change this contact")
	case errors.As(err, &ie):
		return badRequest("%s: %s", ie.Field, ie.Msg)
	case errors.As(err, &ce) && ce.TooLarge:
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "%s", ce.Msg)
	case errors.As(err, &ce):
		return badRequest("%s", ce.Msg)
	case historyInvalid(err):
		return badRequest("%s", err.Error()[len("history: "):])
	case errors.Is(err, history.ErrPBXFilter):
		// A user limited to some PBXs (auth.User.PBXs) and a remote history.
		return errorf(http.StatusNotImplemented, "pbx_filter", "%s", err.Error()[len("history: "):])
	}
	return err
}

// intParam reads an optional non-negative integer query parameter.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s: want a non-negative integer", name)
	}
	return n, nil
}

func (h *handler) pbSearch(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	limit, err := intParam(r, "limit", phonebook.DefaultLimit)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	if limit == 0 {
		limit = phonebook.DefaultLimit
	}
	p, err := h.cfg.Phonebook.Search(r.Context(), actor(u), r.PathValue("term"), limit, offset)
	if err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, p)
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("id: want a positive integer")
	}
	return id, nil
}

func (h *handler) pbGet(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	id, err := pathID(r)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	c, err := h.cfg.Phonebook.Get(r.Context(), actor(u), id)
	if err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, c)
}

func (h *handler) pbLookup(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	cs, err := h.cfg.Phonebook.LookupContacts(r.Context(), actor(u), r.PathValue("number"))
	if err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, phonebook.Page{Count: len(cs), Rows: cs})
}

// contactBody is a contact as clients send it (NethCTI names; id only for
// modify).
type contactBody struct {
	ID           int64           `json:"id"`
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Company      string          `json:"company"`
	WorkPhone    string          `json:"workphone"`
	HomePhone    string          `json:"homephone"`
	CellPhone    string          `json:"cellphone"`
	Fax          string          `json:"fax"`
	WorkEmail    string          `json:"workemail"`
	HomeEmail    string          `json:"homeemail"`
	Notes        json.RawMessage `json:"notes"`
	SpeeddialNum string          `json:"speeddial_num"`
	// Accepted and ignored: the owner is the user (create) or unchanged.
	OwnerID string `json:"owner_id"`
	Source  string `json:"source"`
}

func (b contactBody) contact() phonebook.Contact {
	return phonebook.Contact{ID: b.ID, Type: b.Type, Name: b.Name, Company: b.Company, WorkPhone: b.WorkPhone,
		HomePhone: b.HomePhone, CellPhone: b.CellPhone, Fax: b.Fax, WorkEmail: b.WorkEmail, HomeEmail: b.HomeEmail,
		SpeeddialNum: b.SpeeddialNum, Source: b.Source}
}

// decodeContact reads a contact. Notes may span lines, so that field is
// raw JSON (exempt from decode's CR/LF check; Validate refuses NUL).
func decodeContact(w http.ResponseWriter, r *http.Request) (phonebook.Contact, error) {
	var b contactBody
	if err := decode(w, r, &b); err != nil {
		return phonebook.Contact{}, err
	}
	c := b.contact()
	if len(b.Notes) > 0 && string(b.Notes) != "null" {
		if err := json.Unmarshal(b.Notes, &c.Notes); err != nil {
			return phonebook.Contact{}, badRequest("notes: want a string")
		}
	}
	return c, nil
}

func (h *handler) pbCreate(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	c, err := decodeContact(w, r)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	c, err = h.cfg.Phonebook.Create(r.Context(), actor(u), c)
	if err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, c)
}

func (h *handler) pbModify(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	c, err := decodeContact(w, r)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	if c.ID <= 0 {
		return writeError(w, h.log, r, badRequest("id: required"))
	}
	c, err = h.cfg.Phonebook.Modify(r.Context(), actor(u), c)
	if err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, c)
}

func (h *handler) pbDelete(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	var body struct {
		ID int64 `json:"id"`
	}
	if err := decode(w, r, &body); err != nil {
		return writeError(w, h.log, r, err)
	}
	if body.ID <= 0 {
		return writeError(w, h.log, r, badRequest("id: required"))
	}
	if err := h.cfg.Phonebook.Delete(r.Context(), actor(u), body.ID); err != nil {
		return writeError(w, h.log, r, storeError(err))
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// pbImport takes a CSV body (header line with the contact's JSON names).
// ?all_or_nothing=true imports nothing when a row is bad; ?type= sets the
// type of rows without one.
func (h *handler) pbImport(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.Phonebook == nil {
		return writeError(w, h.log, r, errNoPhonebook)
	}
	q := r.URL.Query()
	opt := phonebook.ImportOptions{Type: q.Get("type")}
	switch q.Get("all_or_nothing") {
	case "", "false", "0":
	case "true", "1":
		opt.AllOrNothing = true
	default:
		return writeError(w, h.log, r, badRequest("all_or_nothing: want true or false"))
	}
	body := http.MaxBytesReader(w, r.Body, MaxImport)
	rep, err := h.cfg.Phonebook.Import(r.Context(), actor(u), body, opt)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return writeError(w, h.log, r, err) // 413
		}
		return writeError(w, h.log, r, storeError(err))
	}
	io.Copy(io.Discard, body)
	return writeJSON(w, http.StatusOK, rep)
}
