package rest

import (
	"bytes"
	"compress/gzip"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// The read fast path. The calls engine publishes immutable snapshots with
// their JSON already encoded; a read writes those bytes as they are. What
// a response needs besides the body (ETag, Content-Length, a gzip copy, a
// filtered copy for users who may not see everything) is made once per
// snapshot version and kept in a verCache, so a request allocates nothing
// of its own: header values are shared []string slices, which net/http
// only reads.

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
)

// verCache is what has been made for one snapshot.
type verCache struct {
	snap *calls.Snapshot
	tag  string   // the version as text: the ETag's opaque part
	etag []string // W/"<version>"

	full [numResources]*entry // unfiltered collections

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

// collection returns a whole collection as v sees it.
func (h *handler) collection(vc *verCache, v auth.View, res resource) *entry {
	c := vc.view(v)
	if c == nil || res == resStatus {
		return vc.full[res]
	}
	c.once[res].Do(func() {
		c.coll[res] = newEntry(h.filterCollection(vc.snap, v, res, nil))
		h.metrics.encoded("view")
	})
	return c.coll[res]
}

// redMemo remembers each entity's redacted JSON (as a user who may not see
// its calls sees it) while its source bytes stay the same. The redaction
// depends on the bytes only (auth.View.SeesCalls), and calls shares an
// unchanged entity's bytes between snapshots, so one entry serves every
// filtered view of every version: a new version (a change, or the
// once-a-second duration refresh) costs one redaction per changed entity,
// not one per entity and per view.
type redMemo struct {
	mu sync.Mutex
	m  [numResources]map[string]memoEntry
}

type memoEntry struct {
	src *byte // the source bytes' identity
	n   int
	red []byte
}

// redacted returns src (entity key of res) as nobody sees it.
func (r *redMemo) redacted(res resource, key string, src []byte) []byte {
	if len(src) == 0 {
		return src
	}
	r.mu.Lock()
	e, ok := r.m[res][key]
	r.mu.Unlock()
	if ok && e.src == &src[0] && e.n == len(src) {
		return e.red
	}
	nobody := auth.ViewOf(nil)
	var red []byte
	switch res {
	case resExtensions:
		red = nobody.Extension(key, src)
	case resQueues:
		red = nobody.Queue(src)
	case resParkings:
		red = nobody.Parking(src)
	case resTrunks:
		red = nobody.Trunk(src)
	}
	r.mu.Lock()
	if r.m[res] == nil {
		r.m[res] = map[string]memoEntry{}
	}
	r.m[res][key] = memoEntry{src: &src[0], n: len(src), red: red}
	r.mu.Unlock()
	return red
}

// prune drops the entries of res whose entity is gone, when they have
// piled up.
func (r *redMemo) prune(res resource, live func(string) bool, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m[res]) <= 2*n+64 {
		return
	}
	for k := range r.m[res] {
		if !live(k) {
			delete(r.m[res], k)
		}
	}
}

// asSeen returns entity key of res (its JSON src) as v sees it: src, or
// its shared redacted copy.
func (h *handler) asSeen(v auth.View, res resource, key string, src []byte) []byte {
	owner := ""
	if res == resExtensions {
		owner = key
	}
	if v.SeesCalls(owner) {
		return src
	}
	return h.red.redacted(res, key, src)
}

// filterCollection assembles {"key":<entity as v sees it>,...} in key
// order, as calls does; with keep, only the keys it keeps (?pbx=).
func (h *handler) filterCollection(s *calls.Snapshot, v auth.View, res resource, keep func(string) bool) []byte {
	var keys []string
	var json func(string) []byte
	var live func(string) bool
	switch res {
	case resExtensions:
		keys, json = s.Extensions.Keys(), s.ExtensionJSON
		live = func(k string) bool { _, ok := s.Extensions.Lookup(k); return ok }
	case resQueues:
		keys, json = slices.Sorted(maps.Keys(s.Queues)), s.QueueJSON
		live = func(k string) bool { _, ok := s.Queues[k]; return ok }
	case resParkings:
		keys, json = slices.Sorted(maps.Keys(s.Parkings)), s.ParkingJSON
		live = func(k string) bool { _, ok := s.Parkings[k]; return ok }
	case resTrunks:
		keys, json = slices.Sorted(maps.Keys(s.Trunks)), s.TrunkJSON
		live = func(k string) bool { _, ok := s.Trunks[k]; return ok }
	}
	defer h.red.prune(res, live, len(keys))
	get := func(k string) []byte { return h.asSeen(v, res, k, json(k)) }
	if keep != nil {
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !keep(k) })
	}
	var b []byte
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = calls.AppendJSONString(b, k)
		b = append(b, ':')
		b = append(b, get(k)...)
	}
	return append(b, '}')
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
		body = vc.snap.ExtensionJSON(key)
	} else {
		body = vc.snap.QueueJSON(key)
	}
	if body != nil {
		body = h.asSeen(v, res, key, body)
	}
	if body == nil {
		return nil // not cached: a client cannot grow the map with made-up names
	}
	e := newEntry(body)
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
	if vc.snap.Stale {
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
			if i := indexByte(v, ','); i >= 0 {
				item, v = v[:i], v[i+1:]
			} else {
				item, v = v, ""
			}
			item = trimSpace(item)
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
			if i := indexByte(v, ','); i >= 0 {
				item, v = v[:i], v[i+1:]
			} else {
				item, v = v, ""
			}
			name, params := item, ""
			if i := indexByte(item, ';'); i >= 0 {
				name, params = item[:i], item[i+1:]
			}
			name = trimSpace(name)
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
	p := trimSpace(params)
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

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
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

// convsKey precedes the conversations object in an extension's JSON; calls
// writes it last. (Inside a JSON string a quote is always escaped, so this
// byte sequence cannot occur in a value.)
var convsKey = []byte(`,"conversations":`)

// getConversations answers the user's own conversations:
// {"<exten>":{"<convid>":{Conversation},...},...} for each endpoint it owns.
func (h *handler) getConversations(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	vc.mu.Lock()
	e := vc.convs[u.Username]
	if e == nil {
		b := []byte{'{'}
		n := 0
		for _, x := range u.Endpoints {
			data := vc.snap.ExtensionJSON(x)
			i := bytes.LastIndex(data, convsKey)
			if i < 0 {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = calls.AppendJSONString(b, x)
			b = append(b, ':')
			b = append(b, data[i+len(convsKey):len(data)-1]...)
		}
		e = newEntry(append(b, '}'))
		vc.convs[u.Username] = e
	}
	vc.mu.Unlock()
	return h.write(w, r, vc, e)
}
