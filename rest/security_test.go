package rest

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckOrigin(t *testing.T) {
	check, err := CheckOrigin([]string{"https://cti.example.com", " HTTPS://Panel.Example.com:8443/ "})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, host, origin string
		want               bool
	}{
		{"no Origin: a native client", "bridge:8080", "", true},
		{"same origin", "bridge:8080", "http://bridge:8080", true},
		{"same origin, other case", "Bridge:8080", "https://bridge:8080", true},
		{"listed", "bridge:8080", "https://cti.example.com", true},
		{"listed, case and port", "bridge:8080", "https://panel.example.com:8443", true},
		{"listed host, other scheme", "bridge:8080", "http://cti.example.com", false},
		{"foreign site", "bridge:8080", "https://evil.example", false},
		{"same host, other port", "bridge:8080", "http://bridge:9999", false},
		{"opaque origin", "bridge:8080", "null", false},
		{"garbage", "bridge:8080", "::::", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws", nil)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if got := check(r); got != c.want {
				t.Errorf("origin %q on %q: %v, want %v", c.origin, c.host, got, c.want)
			}
		})
	}
	anyOrigin, err := CheckOrigin([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/ws", nil)
	r.Header.Set("Origin", "https://anywhere.example")
	if !anyOrigin(r) {
		t.Error("* refused a foreign origin")
	}
	for _, bad := range []string{"cti.example.com", "ftp://x", "https://x/path", "https://", "https://x?q=1"} {
		if _, err := CheckOrigin([]string{bad}); err == nil || !strings.Contains(err.Error(), "want scheme://host") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestSecureHeaders(t *testing.T) {
	h := SecureHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page" {
			DocumentHeaders(w.Header())
		}
		w.WriteHeader(http.StatusOK)
	}))
	for _, c := range []struct {
		path    string
		tls     bool
		doc     bool // the headers only a document needs
		wantTSS bool
	}{
		{"/api", false, false, false},
		{"/api", true, false, true},
		{"/page", false, true, false},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		hd := w.Result().Header
		doc := hd.Get("Referrer-Policy") == "no-referrer" && hd.Get("X-Frame-Options") == "DENY" &&
			hd.Get("Content-Security-Policy") == "default-src 'none'; frame-ancestors 'none'"
		none := hd.Get("Referrer-Policy") == "" && hd.Get("X-Frame-Options") == "" && hd.Get("Content-Security-Policy") == ""
		if hd.Get("X-Content-Type-Options") != "nosniff" || (c.doc && !doc) || (!c.doc && !none) ||
			(hd.Get("Strict-Transport-Security") != "") != c.wantTSS {
			t.Errorf("%s tls=%v: headers %v", c.path, c.tls, hd)
		}
	}
	r := httptest.NewRequest("GET", "/api", nil)
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() { clear(w.HeaderMap); h.ServeHTTP(w, r) }); n != 0 {
		t.Errorf("SecureHeaders allocates %v times", n)
	}
}
