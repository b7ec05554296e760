package nethcti

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest"
)

// Reads of extensions with NethCTI's "username" (phone-island decides
// "my call" by it): the native read is asked in process once per state
// version (snapshot), view and users set, the usernames put in, and the
// result served from memory with the native read's headers, the front's
// own ETag and a gzip copy, as the native reads are; the native body
// depends on nothing else, so a read from the cache shows what the
// native read would.

// readEntry is one view's body of one read at one state version: the
// native body with usernames, and the native headers that go with it.
type readEntry struct {
	snap         *calls.Snapshot // the state it was read at
	users        *userNames      // the users set it names
	tick         int64           // the second it was made at, for a shape that counts down; else 0
	tag          []string        // the front's ETag: the native one with the users set's number
	cacheControl []string
	vary         []string
	stale        []string // X-Ctibridge-Stale, nil when not stale
	body         []byte
	gzOnce       sync.Once
	gz           []byte
}

func (e *readEntry) gzipped() []byte {
	e.gzOnce.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		zw.Write(e.body)
		zw.Close()
		e.gz = b.Bytes()
	})
	return e.gz
}

// readCacheMax bounds the entries (views × routes × ids); cleared whole
// when full.
const readCacheMax = 1024

type readCache struct {
	mu sync.RWMutex
	m  map[readKey]*readEntry
}

func (c *readCache) get(k readKey) *readEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[k]
}

func (c *readCache) put(k readKey, e *readEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= readCacheMax {
		c.m = map[readKey]*readEntry{}
	}
	c.m[k] = e
}

// readKey names a cache entry: the view, the PBXs the user is limited
// to, the route and its query.
type readKey struct{ view, pbxs, path, query string }

var recPool = sync.Pool{New: func() any { return newRecorder() }}

// reshape turns a native read's body into NethCTI's, for one users set
// at one time (Unix seconds; 0 when the shape does not depend on it).
type reshape func(body []byte, names *userNames, r *http.Request, now int64) ([]byte, error)

// withUsernames serves a native extension read (the collection, or one
// extension when single) with "username" in every extension.
func (f *Front) withUsernames(w http.ResponseWriter, r *http.Request, id Identity, path string, single bool) int {
	return f.reshaped(w, r, id, path, 0, func(body []byte, names *userNames, r *http.Request, _ int64) ([]byte, error) {
		return addUsernames(body, names, r.PathValue("exten"), single)
	})
}

// reshaped serves a native read reshaped, from the cache while the state
// version, the users set and tick (the second, for a shape that counts
// down; else 0) are those it was made at.
func (f *Front) reshaped(w http.ResponseWriter, r *http.Request, id Identity, path string, tick int64, shape reshape) int {
	names, snap := f.namesOf(), f.cfg.State.Snapshot()
	key := readKey{auth.ViewOf(id.User).Key(), id.User.PBXKey(), path, r.URL.RawQuery}
	e := f.reads.get(key)
	if e == nil || e.snap != snap || e.users != names || e.tick != tick {
		var status int
		if e, status = f.readNative(w, r, id, path, key, snap, names, tick, shape); e == nil {
			return status
		}
	}
	hdr := w.Header()
	hdr["Etag"] = e.tag
	hdr["Cache-Control"], hdr["Vary"] = e.cacheControl, e.vary
	if e.stale != nil {
		hdr["X-Ctibridge-Stale"] = e.stale
	}
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagListed(inm, e.tag[0]) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	body := e.body
	if len(body) >= 1024 && acceptsGzip(r.Header["Accept-Encoding"]) {
		body = e.gzipped()
		hdr["Content-Encoding"] = hdrGzip
	}
	hdr["Content-Type"] = hdrJSON
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return http.StatusOK
}

// readNative asks the native handler for the read as id's user and
// caches its body with usernames for snap. On a native refusal it has
// answered w and returns a nil entry.
func (f *Front) readNative(w http.ResponseWriter, r *http.Request, id Identity, path string, key readKey,
	snap *calls.Snapshot, names *userNames, tick int64, shape reshape) (*readEntry, int) {
	rec := recPool.Get().(*recorder)
	defer func() {
		clear(rec.hdr)
		rec.status = 0
		rec.body.Reset()
		recPool.Put(rec)
	}()
	r2 := rest.AsUser(r, id.User) // a copy of r, to edit
	u := *r.URL
	u.Path, u.RawPath = path, ""
	r2.URL = &u
	r2.Header = http.Header{}
	f.api.ServeHTTP(rec, r2)
	if rec.status != http.StatusOK {
		return nil, rec.copyTo(w)
	}
	body, err := shape(rec.body.Bytes(), names, r, tick)
	if err != nil {
		return nil, writeErr(w, r, err)
	}
	etag := strings.TrimSuffix(strings.Join(rec.hdr["Etag"], ""), `"`) + "-u" + names.seq
	if tick != 0 {
		etag += "-t" + strconv.FormatInt(tick, 10)
	}
	e := &readEntry{snap: snap, users: names, tick: tick, body: body, tag: []string{etag + `"`},
		cacheControl: rec.hdr["Cache-Control"], vary: rec.hdr["Vary"], stale: rec.hdr["X-Ctibridge-Stale"]}
	f.reads.put(key, e)
	return e, http.StatusOK
}

// etagListed reports whether an If-None-Match header lists tag (or *).
func etagListed(values []string, tag string) bool {
	bare := strings.TrimPrefix(tag, "W/")
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimPrefix(strings.TrimSpace(item), "W/")
			if item == "*" || item == bare {
				return true
			}
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding names gzip (and not with
// q=0).
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			name, q, _ := strings.Cut(strings.TrimSpace(p), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

var (
	hdrGzip = []string{"gzip"}
	hdrJSON = []string{"application/json"}
)

var errBadNative = errors.New("nethcti: the native read is not a JSON object")

// addUsernames reshapes body (the collection keyed by number, or one
// extension numbered exten) into NethCTI's extensions: "username" (the
// owner's), and every conversation's chSource and chDest.
func addUsernames(body []byte, names *userNames, exten string, single bool) ([]byte, error) {
	if single {
		m, err := decodeObject(body)
		if err != nil {
			return nil, err
		}
		nethExtension(m, names.byExt[exten])
		return json.Marshal(m)
	}
	return eachEntityKeyed(body, func(k string, x map[string]any) { nethExtension(x, names.byExt[k]) })
}

// nethExtension adds NethCTI's fields to an extension: username, and its
// conversations' channel objects. chSource is the channel the
// conversation's id names first (the caller's), chDest the second; each
// says its party's number and name and the other's (bridged), from the
// extension and the counterpart as the user may see them (a hidden
// number stays "", an opaque channel opaque).
func nethExtension(x map[string]any, username string) {
	x["username"] = username
	convs, _ := x["conversations"].(map[string]any)
	for _, c := range convs {
		c, ok := c.(map[string]any)
		if !ok {
			continue
		}
		id, _ := c["id"].(string)
		src, dst, _ := strings.Cut(id, ">")
		own := map[string]any{"callerNum": x["exten"], "callerName": x["name"]}
		other := map[string]any{"callerNum": c["counterpartNum"], "callerName": c["counterpartName"]}
		first, second := other, own
		if c["direction"] == "out" {
			first, second = own, other
		}
		for _, ch := range []struct {
			m, peer map[string]any
			name    string
		}{{first, second, src}, {second, first, dst}} {
			ch.m["type"], ch.m["channel"], ch.m["inConference"], ch.m["startTime"] = "channel", ch.name, c["inConference"], c["startTime"]
		}
		first["bridgedNum"], first["bridgedName"] = second["callerNum"], second["callerName"]
		second["bridgedNum"], second["bridgedName"] = first["callerNum"], first["callerName"]
		c["chSource"], c["chDest"] = first, second
	}
}
