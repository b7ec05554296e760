package panel

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path under which the assets are served; Handler answers
// Prefix + "<hash>/<file>".
const Prefix = "/panel/"

// csp is the Content-Security-Policy of every answer: only this origin's
// scripts, styles and connections (the WebSocket included: CSP Level 3's
// 'self' matches ws: and wss: on the same host), no inline script or
// style element, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

type handler struct {
	index  asset
	assets map[string]asset // by name relative to static/
	base   string           // Prefix + hash + "/"
}

// Handler serves the panel: GET or HEAD "/" (and "/index.html") answer
// the page, Prefix+"<hash>/..." the assets; anything else is 404.
func Handler() http.Handler {
	h, err := newHandler(static)
	if err != nil {
		panic("panel: " + err.Error()) // the embedded files are fixed at build time
	}
	return h
}

func newHandler(fsys fs.FS) (*handler, error) {
	sub, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		files[p] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, n := range names {
		sum.Write([]byte(n))
		sum.Write([]byte{0})
		sum.Write([]byte(strconv.Itoa(len(files[n]))))
		sum.Write([]byte{0})
		sum.Write(files[n])
	}
	hash := hex.EncodeToString(sum.Sum(nil))[:16]
	h := &handler{assets: map[string]asset{}, base: Prefix + hash + "/"}
	for _, n := range names {
		if n == "index.html" {
			continue
		}
		h.assets[n] = newAsset(n, files[n])
	}
	page, ok := files["index.html"]
	if !ok {
		return nil, fs.ErrNotExist
	}
	// index.html names its assets "{{base}}file"; the page is the only
	// file rewritten, so that a module's relative imports stay under the
	// same hashed directory.
	h.index = newAsset("index.html", bytes.ReplaceAll(page, []byte("{{base}}"), []byte(h.base)))
	return h, nil
}

func newAsset(name string, b []byte) asset {
	ctype := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) { // do not depend on the host's mime tables
	case ".js":
		ctype = "text/javascript; charset=utf-8"
	case ".css":
		ctype = "text/css; charset=utf-8"
	case ".html":
		ctype = "text/html; charset=utf-8"
	case ".svg":
		ctype = "image/svg+xml"
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	s := sha256.Sum256(b)
	return asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(s[:8]) + `"`}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/" || p == "/index.html":
		hd.Set("Cache-Control", "no-cache")
		h.write(w, r, h.index)
		return
	case strings.HasPrefix(p, h.base):
		if a, ok := h.assets[strings.TrimPrefix(p, h.base)]; ok {
			hd.Set("Cache-Control", "public, max-age=31536000, immutable")
			h.write(w, r, a)
			return
		}
	case strings.HasPrefix(p, Prefix):
		// An asset of another build (a page loaded before an upgrade):
		// serve today's file, but do not let it be cached as the old one.
		rest := strings.TrimPrefix(p, Prefix)
		if _, name, ok := strings.Cut(rest, "/"); ok {
			if a, ok := h.assets[name]; ok {
				hd.Set("Cache-Control", "no-cache")
				h.write(w, r, a)
				return
			}
		}
	}
	hd.Set("Cache-Control", "no-store")
	http.NotFound(w, r)
}

func (h *handler) write(w http.ResponseWriter, r *http.Request, a asset) {
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(a.body)
}

// etagMatch reports whether an If-None-Match list names etag.
func etagMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
