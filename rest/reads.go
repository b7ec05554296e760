package rest

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// The read fast path. The calls engine publishes immutable snapshots with
// their JSON already encoded, once per visibility class; a read writes the
// bytes of its user's class as they are. What a response needs besides
// the body (ETag, Content-Length, a gzip copy, the parts of a filtered
// extensions collection) is made once per snapshot version and kept in a
// verCache, so a request allocates nothing of its own: header values are
// shared []string slices, which net/http only reads.

// gzipMin: smaller bodies are sent as they are even to gzip clients.
const gzipMin = 1024

var (
	hdrGzip    = []string{"gzip"}
	hdrTrue    = []string{"true"}
	hdrVary    = []string{"Accept-Encoding, Authorization"}
	hdrNoCache = []string{"private, no-cache"}
)

// entry is one response body with its header values. The body is body,
// or, when parts is set, parts written one after the other (the
// extensions collection: calls shares its unchanged pieces between
// versions, so a new version costs no copy of the whole).
type entry struct {
	body  []byte
	parts [][]byte
	n     int      // the body's length
	clen  []string // Content-Length

	// covers: the body covers some PBXs only (a ?pbx= read, a user
	// limited to some, one entity), and stale is whether one of those is
	// stale (X-Ctibridge-Stale); otherwise the snapshot's Stale says.
	covers, stale bool

	gzOnce sync.Once
	gz     []byte
	gzLen  []string
}

func newEntry(body []byte) *entry {
	return &entry{body: body, n: len(body), clen: []string{strconv.Itoa(len(body))}}
}

func newPartsEntry(parts [][]byte) *entry {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return &entry{parts: parts, n: n, clen: []string{strconv.Itoa(n)}}
}

func (e *entry) gzipped(m *Metrics) ([]byte, []string) {
	e.gzOnce.Do(func() {
		var b bytes.Buffer
		b.Grow(e.n / 4)
		// BestSpeed: made once per version, but versions change many times
		// a second on a busy PBX; JSON still shrinks about 8 times.
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		zw.Write(e.body)
		for _, p := range e.parts {
			zw.Write(p)
		}
		zw.Close()
		e.gz = b.Bytes()
		e.gzLen = []string{strconv.Itoa(len(e.gz))}
		m.encoded("gzip")
	})
	return e.gz, e.gzLen
}

// resource names a whole-collection read.
type resource uint8

const (
	resExtensions resource = iota
	resQueues
	resParkings
	resTrunks
	resStatus
	numResources
	// Reads cached in the pbxCache only (pbxreads.go), by user where the
	// body is the user's own.
	resConversations = numResources
	resConferences   = numResources + 1
	resVoicemail     = numResources + 2
)

// verCache is what has been made for one snapshot.
type verCache struct {
	snap *calls.Snapshot
	tag  string   // the version as text: the ETag's opaque part
	etag []string // W/"<version>"

	full [numResources]*entry // collections in class Full

	mu    sync.Mutex            // guards the maps
	exts  map[string]*entry     // single extensions, unfiltered
	ques  map[string]*entry     // single queues, unfiltered
	views map[string]*viewCache // by auth view key
	convs map[string]*entry     // own conversations, by user name
}

// viewCache is one filtered view of a snapshot.
type viewCache struct {
	once [numResources]sync.Once
	coll [numResources]*entry
	exts map[string]*entry // guarded by verCache.mu
	ques map[string]*entry // guarded by verCache.mu
}

func newVerCache(s *calls.Snapshot) *verCache {
	tag := strconv.FormatUint(s.Version, 10)
	if s.Unheard {
		// The same version said stale by the node alone (package bus):
		// not the bytes a client cached as that version.
		tag += "-unheard"
	}
	vc := &verCache{
		snap: s, tag: tag, etag: []string{`W/"` + tag + `"`},
		exts: map[string]*entry{}, ques: map[string]*entry{},
		views: map[string]*viewCache{}, convs: map[string]*entry{},
	}
	vc.full[resExtensions] = newPartsEntry(s.ExtensionsParts())
	vc.full[resQueues] = newEntry(s.QueuesJSON())
	vc.full[resParkings] = newEntry(s.ParkingsJSON())
	vc.full[resTrunks] = newEntry(s.TrunksJSON())
	vc.full[resStatus] = newEntry(s.StatusJSON())
	return vc
}

// current returns the cache of the latest snapshot, making it on the first
// request after a publish.
func (h *handler) current() *verCache {
	s := h.state.Snapshot()
	vc := h.cache.Load()
	if vc != nil && vc.snap == s {
		return vc
	}
	if vc != nil && vc.snap.Version > s.Version {
		// Another request already moved on; a snapshot older than that
		// is still a consistent answer.
		return newVerCache(s)
	}
	nvc := newVerCache(s)
	h.cache.CompareAndSwap(vc, nvc)
	return nvc
}

// view returns the cache of a filtered view, or nil when v hides nothing.
func (vc *verCache) view(v auth.View) *viewCache {
	if v.Full() {
		return nil
	}
	k := v.Key()
	vc.mu.Lock()
	defer vc.mu.Unlock()
	c := vc.views[k]
	if c == nil {
		c = &viewCache{exts: map[string]*entry{}, ques: map[string]*entry{}}
		vc.views[k] = c
	}
	return c
}

// collection returns a whole collection as v sees it: the engine's bytes
// of v's class (calls.Class), and for extensions the hidden collection
// with the extensions v sees in full put in (calls.Snapshot.ExtensionsFor:
// parts, no copy of the body).
func (h *handler) collection(vc *verCache, v auth.View, res resource) *entry {
	c := vc.view(v)
	if c == nil || res == resStatus || res != resExtensions && v.Class("") == calls.Full {
		return vc.full[res]
	}
	c.once[res].Do(func() {
		s := vc.snap
		switch res {
		case resExtensions:
			c.coll[res] = newPartsEntry(s.ExtensionsFor(v.FullExtensions()))
		case resQueues:
			c.coll[res] = newEntry(s.QueuesJSONAs(calls.NumbersHidden))
		case resParkings:
			c.coll[res] = newEntry(s.ParkingsJSONAs(calls.NumbersHidden))
		case resTrunks:
			c.coll[res] = newEntry(s.TrunksJSONAs(calls.NumbersHidden))
		}
		h.metrics.encoded("view")
	})
	return c.coll[res]
}

// single returns one extension or queue as v sees it, or nil when it does
// not exist.
func (h *handler) single(vc *verCache, v auth.View, res resource, key string) *entry {
	c := vc.view(v)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	var m map[string]*entry
	switch {
	case res == resExtensions && c == nil:
		m = vc.exts
	case res == resExtensions:
		m = c.exts
	case c == nil:
		m = vc.ques
	default:
		m = c.ques
	}
	if e, ok := m[key]; ok {
		return e
	}
	var body []byte
	if res == resExtensions {
		body = vc.snap.ExtensionJSONAs(key, v.Class(key))
	} else {
		body = vc.snap.QueueJSONAs(key, v.Class(""))
	}
	if body == nil {
		return nil // not cached: a client cannot grow the map with made-up names
	}
	e := newEntry(body)
	e.covers, e.stale = true, h.pbxStale(vc.snap, key)
	m[key] = e
	return e
}

// write sends a cached body: 304 when the client has this version, the
// gzip copy when the client accepts it.
func (h *handler) write(w http.ResponseWriter, r *http.Request, vc *verCache, e *entry) int {
	hdr := w.Header()
	hdr["Etag"] = vc.etag
	hdr["Cache-Control"] = hdrNoCache
	hdr["Vary"] = hdrVary
	if e.covers && e.stale || !e.covers && vc.snap.Stale {
		hdr["X-Ctibridge-Stale"] = hdrTrue
	}
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagMatch(inm, vc.tag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	body, parts, clen := e.body, e.parts, e.clen
	if e.n >= gzipMin && acceptsGzip(r.Header["Accept-Encoding"]) {
		body, clen = e.gzipped(h.metrics)
		parts = nil
		hdr["Content-Encoding"] = hdrGzip
	}
	hdr["Content-Type"] = hdrJSON
	hdr["Content-Length"] = clen
	w.WriteHeader(http.StatusOK)
	if body != nil {
		w.Write(body)
	}
	for _, p := range parts {
		w.Write(p)
	}
	return http.StatusOK
}

// etagMatch reports whether an If-None-Match header lists the version tag
// (weak comparison, RFC 9110 section 13.1.2), or is "*".
func etagMatch(values []string, tag string) bool {
	for _, v := range values {
		for len(v) > 0 {
			var item string
			if i := strings.IndexByte(v, ','); i >= 0 {
				item, v = v[:i], v[i+1:]
			} else {
				item, v = v, ""
			}
			item = strings.TrimSpace(item)
			if item == "*" {
				return true
			}
			if len(item) >= 2 && item[0] == 'W' && item[1] == '/' {
				item = item[2:]
			}
			if len(item) == len(tag)+2 && item[0] == '"' && item[len(item)-1] == '"' && item[1:len(item)-1] == tag {
				return true
			}
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding allows gzip (present and not
// q=0).
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for len(v) > 0 {
			var item string
			if i := strings.IndexByte(v, ','); i >= 0 {
				item, v = v[:i], v[i+1:]
			} else {
				item, v = v, ""
			}
			name, params := item, ""
			if i := strings.IndexByte(item, ';'); i >= 0 {
				name, params = item[:i], item[i+1:]
			}
			name = strings.TrimSpace(name)
			if len(name) != 4 || (name[0]|0x20) != 'g' || (name[1]|0x20) != 'z' || (name[2]|0x20) != 'i' || (name[3]|0x20) != 'p' {
				continue
			}
			return !qZero(params)
		}
	}
	return false
}

// qZero reports a "q=0" (or 0.0, 0.00, 0.000) parameter.
func qZero(params string) bool {
	p := strings.TrimSpace(params)
	if len(p) < 3 || (p[0]|0x20) != 'q' || p[1] != '=' {
		return false
	}
	for _, c := range p[2:] {
		if c != '0' && c != '.' {
			return false
		}
	}
	return true
}

func (h *handler) getStatus(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	return h.write(w, r, vc, vc.full[resStatus])
}

func (h *handler) getExtensions(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	return h.write(w, r, vc, h.collection(vc, auth.ViewOf(u), resExtensions))
}

func (h *handler) getQueues(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	return h.write(w, r, vc, h.collection(vc, auth.ViewOf(u), resQueues))
}

func (h *handler) getParkings(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	return h.write(w, r, vc, h.collection(vc, auth.ViewOf(u), resParkings))
}

func (h *handler) getTrunks(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	return h.write(w, r, vc, h.collection(vc, auth.ViewOf(u), resTrunks))
}

func (h *handler) getExtension(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	x := r.PathValue("exten")
	e := h.single(vc, auth.ViewOf(u), resExtensions, x)
	if e == nil {
		return writeError(w, h.log, r, notFound("extension %q does not exist", x))
	}
	return h.write(w, r, vc, e)
}

func (h *handler) getQueue(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	q := r.PathValue("queue")
	if name, ok := vc.snap.QueueName(q); ok {
		q = name // the dialled number is an alias of the app_queue name
	}
	e := h.single(vc, auth.ViewOf(u), resQueues, q)
	if e == nil {
		return writeError(w, h.log, r, notFound("queue %q does not exist", q))
	}
	return h.write(w, r, vc, e)
}

// getConversations answers the user's own conversations:
// {"<exten>":{"<convid>":{Conversation},...},...} for each endpoint it owns.
func (h *handler) getConversations(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	vc.mu.Lock()
	e := vc.convs[u.Username]
	if e == nil {
		e = newEntry(conversationsJSON(vc.snap, u, nil))
		vc.convs[u.Username] = e
	}
	vc.mu.Unlock()
	return h.write(w, r, vc, e)
}

// conversationsJSON is the conversations of u's endpoints that keep keeps
// (nil: all) in s.
func conversationsJSON(s *calls.Snapshot, u *auth.User, keep func(string) bool) []byte {
	return jsonObject(u.Endpoints, func(x string) []byte {
		if keep != nil && !keep(x) {
			return nil
		}
		return s.ConversationsJSON(x)
	})
}

// jsonObject is {"<key>":<value>,...} of keys in their order, value(key)
// the JSON of each, nil to leave the key out.
func jsonObject(keys []string, value func(string) []byte) []byte {
	b := []byte{'{'}
	for _, k := range keys {
		v := value(k)
		if v == nil {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = calls.AppendJSONString(b, k)
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}')
}
