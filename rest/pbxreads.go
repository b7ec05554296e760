package rest

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Reads of some PBXs (docs/operations.md "Several PBXs"): a read with
// ?pbx=NAME covers that PBX only ("default" for the PBX of --ami), and a
// user limited to some PBXs (auth.User.PBXs) reads those only. Such a
// read answers the entities of the PBXs it covers, the status of their
// links only (top level the worst of them), and says X-Ctibridge-Stale
// when one of them is stale, not when another PBX is. Its body is made
// once per snapshot version, PBX, the user's PBXs and view (and user,
// where the body is the user's own), so a poller's read allocates
// nothing.

// pbxRead is what one read covers.
type pbxRead struct {
	only string // ?pbx=: "*" when not given, else a name ("default" included)
	pbx  string // only as a PBXState.Name: "" for the default PBX
	u    *auth.User
}

// sees reports whether the read covers PBX p ("" the default).
func (q pbxRead) sees(p string) bool { return (q.only == "*" || p == q.pbx) && q.u.SeesPBX(p) }

// seesID reports whether the read covers the PBX of combined id k.
func (h *handler) seesID(q pbxRead, k string) bool {
	p, _ := calls.SplitID(k, h.known)
	return q.sees(p)
}

// pbxFilter reads ?pbx= and the user's PBXs: ok is false when the read
// covers every PBX (no ?pbx=, no limit). An unknown PBX, or one the user
// may not see, is a 404. It does not allocate.
func (h *handler) pbxFilter(r *http.Request, u *auth.User) (q pbxRead, ok bool, err error) {
	q = pbxRead{only: "*", u: u}
	// No allocation on the fast path: no ?pbx=, no limit.
	if !strings.Contains(r.URL.RawQuery, "pbx=") && !u.PBXLimited() {
		return q, false, nil
	}
	if name, n := pbxParam(r.URL.RawQuery); n > 0 {
		if n != 1 || name != calls.DefaultPBXName && !h.known(name) || !u.SeesPBX(name) {
			return q, false, notFound("no PBX named %q (known: %s and the named ones in GET /astproxy/status)", name, calls.DefaultPBXName)
		}
		if q.only = name; name != calls.DefaultPBXName {
			q.pbx = name
		}
		return q, true, nil
	}
	return q, u.PBXLimited(), nil
}

// byPBX serves read res for a read of some PBXs from the cache, made by
// body; other reads by next.
func (h *handler) byPBX(res resource, next endpoint) endpoint {
	return func(w http.ResponseWriter, r *http.Request, u *auth.User) int {
		q, ok, err := h.pbxFilter(r, u)
		if err != nil {
			return writeError(w, h.log, r, err)
		}
		if !ok {
			return next(w, r, u)
		}
		return h.writePBXs(w, r, res, q)
	}
}

// writePBXs writes read res of the PBXs q covers, from the cache.
func (h *handler) writePBXs(w http.ResponseWriter, r *http.Request, res resource, q pbxRead) int {
	vc := h.current()
	v := auth.ViewOf(q.u)
	key := pbxCacheKey{res: res, pbx: q.only, pbxs: q.u.PBXKey(), view: v.Key()}
	if res == resConversations || res == resConferences && !v.Full() {
		key.user = q.u.Username // the user's own endpoints; a room's members as the user sees them
	}
	e := h.byPBXs.get(vc.snap.Version, key, func() *entry {
		e := newEntry(h.pbxBody(vc.snap, v, res, q))
		e.covers, e.stale = true, vc.snap.StaleFor(q.sees)
		return e
	})
	return h.write(w, r, vc, e)
}

// pbxBody is read res of s as q covers it, each entity in the class v
// shows it in (auth.View.Class: an extension by its own, the others by
// the calls no extension owns), so a filtered user's ?pbx= read blanks
// what the same user's whole-collection read blanks. The entities' bytes
// are the engine's, picked (calls.Snapshot.CollectionWhere).
func (h *handler) pbxBody(s *calls.Snapshot, v auth.View, res resource, q pbxRead) []byte {
	keep := func(k string) bool { return h.seesID(q, k) }
	if q.only == "*" && !q.u.PBXLimited() {
		keep = nil // every PBX
	}
	switch res {
	case resStatus:
		return s.StatusFor(q.sees)
	case resConversations:
		return conversationsJSON(s, q.u, keep)
	case resConferences:
		return conferencesJSON(s, q.u, keep)
	case resVoicemail:
		return voicemailJSON(s, keep)
	}
	class := func(string) calls.Class { return v.Class("") }
	if res == resExtensions {
		class = v.Class
	}
	if keep == nil {
		keep = func(string) bool { return true }
	}
	return s.CollectionWhere(collOf[res], keep, class)
}

var collOf = [...]calls.Collection{
	resExtensions: calls.CollExtensions, resQueues: calls.CollQueues,
	resParkings: calls.CollParkings, resTrunks: calls.CollTrunks,
}

// pbxCache keeps the reads of some PBXs of one snapshot version, by
// resource, PBX and view (and user, for the user's own), so that a
// poller's read costs what any other read costs: the first after a change
// makes the body.
type pbxCache struct {
	mu  sync.Mutex
	ver uint64
	m   map[pbxCacheKey]*entry
}

type pbxCacheKey struct {
	res             resource
	pbx, pbxs, view string // ?pbx= ("*": none), the user's PBXs (auth.User.PBXKey), the view
	user            string // for a body that is the user's own; else ""
}

func (c *pbxCache) get(ver uint64, k pbxCacheKey, make func() *entry) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.ver != ver {
		c.m, c.ver = map[pbxCacheKey]*entry{}, ver
	}
	e := c.m[k]
	if e == nil {
		e = make()
		c.m[k] = e
	}
	return e
}

// pbxParam is the value of the query's pbx parameter and how many there
// are, read without allocating (url.Values would, on every request).
// PBX names need no escaping; an escaped value is unescaped.
func pbxParam(raw string) (name string, n int) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if k, val, _ := strings.Cut(kv, "="); k == "pbx" {
			name, n = val, n+1
		}
	}
	if strings.ContainsAny(name, "%+") {
		if u, err := url.QueryUnescape(name); err == nil {
			name = u
		}
	}
	return name, n
}

// pbxStale is whether the PBX of combined id k is stale: what a read of
// that one entity says of its state.
func (h *handler) pbxStale(s *calls.Snapshot, k string) bool {
	p, _ := calls.SplitID(k, h.known)
	return s.PBXStale(p)
}
