package rest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// remoteDoer sends path-only requests to a real HTTP server, as
// upstream.Client does.
type remoteDoer struct{ base *url.URL }

func (d remoteDoer) Do(req *http.Request) (*http.Response, error) {
	req.URL = d.base.ResolveReference(req.URL)
	return http.DefaultClient.Do(req)
}

func TestCustomerCard(t *testing.T) {
	var gotUser string
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser = r.Header.Get("X-CTI-User")
		switch r.URL.Path {
		case "/customercard/0721405516":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<h1>ACME</h1>")
		case "/customercard/500":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer remote.Close()
	base, _ := url.Parse(remote.URL)

	unconfigured := newFixture(t, false, nil)
	if r := unconfigured.do("GET", "/customercard/0721405516", "alice", ""); r.status != 503 || r.errorCode() != "no_customer_card" {
		t.Errorf("unconfigured: %d %s", r.status, r.body)
	}

	f := newFixture(t, false, func(c *Config) { c.CustomerCard = remoteDoer{base} })
	r := f.do("GET", "/customercard/0721405516", "alice", "")
	if r.status != 200 || string(r.body) != "<h1>ACME</h1>" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("card: %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r.header.Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" || r.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("a relayed page without the document headers: %v", r.header)
	}
	if gotUser != "alice" {
		t.Errorf("the service saw user %q", gotUser)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/customercard/999", 404},
		{"/customercard/500", 502},
		{"/customercard/12a%0D%0AX:1", 400}, // never reaches the service
	} {
		if r := f.do("GET", tc.path, "alice", ""); r.status != tc.status {
			t.Errorf("GET %s = %d %s, want %d", tc.path, r.status, r.body, tc.status)
		}
	}
	if r := f.do("GET", "/customercard/0721405516", "", ""); r.status != 401 {
		t.Errorf("no token: %d", r.status)
	}
}
