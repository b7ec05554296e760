package panel

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIndex(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/index.html"} {
		res := get(t, h, "GET", p)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
		if got := res.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", p, got)
		}
		if got := res.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q", p, got)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("CSP allows unsafe sources: %q", csp)
		}
		page := body(t, res)
		if strings.Contains(page, "{{base}}") {
			t.Error("index.html still has {{base}} placeholders")
		}
		// No inline script or style: the CSP would block them anyway.
		if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(page) || strings.Contains(page, "<style") || strings.Contains(page, " style=") {
			t.Error("index.html has an inline script or style")
		}
		if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(page) {
			t.Error("index.html loads an external resource")
		}
	}
}

// TestAssetsResolve checks that every asset the page names and every
// module a module imports is served, with a long cache lifetime.
func TestAssetsResolve(t *testing.T) {
	h := Handler()
	page := body(t, get(t, h, "GET", "/"))
	refs := regexp.MustCompile(`(?:src|href)="(/panel/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html names %d assets", len(refs))
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range refs {
		queue = append(queue, r[1])
	}
	imp := regexp.MustCompile(`(?m)^\s*import\s[^'"]*['"]\./([^'"]+)['"]`)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		res := get(t, h, "GET", p)
		if res.StatusCode != 200 {
			t.Errorf("GET %s: %d", p, res.StatusCode)
			continue
		}
		if got := res.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
			t.Errorf("GET %s: Cache-Control %q", p, got)
		}
		if strings.HasSuffix(p, ".js") {
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("GET %s: Content-Type %q", p, ct)
			}
			dir := p[:strings.LastIndex(p, "/")+1]
			for _, m := range imp.FindAllStringSubmatch(body(t, res), -1) {
				queue = append(queue, dir+m[1])
			}
		}
	}
	// Every file shipped is reachable (no dead files).
	fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() || p == "static/index.html" {
			return nil
		}
		name := strings.TrimPrefix(p, "static/")
		found := false
		for s := range seen {
			if strings.HasSuffix(s, "/"+name) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is never referenced", name)
		}
		return nil
	})
}

func TestCachingAndErrors(t *testing.T) {
	h := Handler().(*handler)
	res := get(t, h, "GET", h.base+"app.js")
	etag := res.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if res := get(t, h, "GET", h.base+"app.js", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", res.StatusCode)
	}
	if res := get(t, h, "HEAD", h.base+"app.js"); res.StatusCode != 200 || body(t, res) != "" {
		t.Errorf("HEAD: %d", res.StatusCode)
	}
	// An asset of an older build is served, uncached.
	if res := get(t, h, "GET", "/panel/0123456789abcdef/app.js"); res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("old build: %d %q", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	for _, p := range []string{"/panel/", h.base + "nope.js", h.base + "../panel.go", "/x"} {
		if res := get(t, h, "GET", p); res.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	if res := get(t, h, "POST", "/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", res.StatusCode)
	}
	if res := get(t, h, "GET", "/"); res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
}
