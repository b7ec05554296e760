package rest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

func TestReadsServeSnapshotBytes(t *testing.T) {
	f := newFixture(t, false, nil)
	s := f.eng.Snapshot()
	tag := `W/"` + itoa(s.Version) + `"`
	for path, want := range map[string][]byte{
		"/astproxy/status":         s.StatusJSON(),
		"/astproxy/extensions":     s.ExtensionsJSON(),
		"/astproxy/extension/2000": s.ExtensionJSON("2000"),
		"/astproxy/queues":         s.QueuesJSON(),
		"/astproxy/queue/401":      s.QueueJSON("401"),
		"/astproxy/parkings":       s.ParkingsJSON(),
		"/astproxy/trunks":         s.TrunksJSON(),
	} {
		r := f.do("GET", path, "root", "")
		if r.status != 200 || !bytes.Equal(r.body, want) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
			continue
		}
		if r.header.Get("Etag") != tag || r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("Content-Length") != itoa(uint64(len(want))) || r.header.Get("X-Ctibridge-Stale") != "" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		for _, inm := range []string{tag, `"` + itoa(s.Version) + `"`, `"x", ` + tag, "*"} {
			if r := f.do("GET", path, "root", "", "If-None-Match", inm); r.status != 304 || len(r.body) != 0 {
				t.Errorf("%s If-None-Match %s: %d", path, inm, r.status)
			}
		}
		if r := f.do("GET", path, "root", "", "If-None-Match", `W/"999999"`); r.status != 200 {
			t.Errorf("%s, old etag: %d", path, r.status)
		}
	}
	for _, path := range []string{"/astproxy/extension/9999", "/astproxy/queue/nope"} {
		if r := f.do("GET", path, "root", ""); r.status != 404 || r.errorCode() != "not_found" {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestReadsGzipOncePerVersion(t *testing.T) {
	f := newFixture(t, false, nil)
	want := f.eng.Snapshot().ExtensionsJSON()
	var first []byte
	for i := range 3 {
		r := f.do("GET", "/astproxy/extensions", "root", "", "Accept-Encoding", "br;q=1, gzip;q=0.8")
		if r.status != 200 || r.header.Get("Content-Encoding") != "gzip" || r.header.Get("Vary") == "" {
			t.Fatalf("%d %v", r.status, r.header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(zr)
		if !bytes.Equal(got, want) {
			t.Fatal("gzip body differs")
		}
		if i == 0 {
			first = r.body
		} else if !bytes.Equal(first, r.body) {
			t.Error("compressed again")
		}
		if len(r.body)*3 > len(want) {
			t.Errorf("gzip: %d of %d bytes", len(r.body), len(want))
		}
	}
	if r := f.do("GET", "/astproxy/extensions", "root", "", "Accept-Encoding", "gzip;q=0"); r.header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}
	if r := f.do("GET", "/astproxy/status", "root", "", "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "" {
		t.Error("tiny body got gzip")
	}
	if got := counterValue(t, f.m, "ctibridge_http_cache_encodings_total", "gzip"); got != 1 {
		t.Errorf("%v gzip encodings, want 1", got)
	}
	// A new version gets a new copy.
	f.eng.Apply(resttest.Churn(resttest.Options{Extensions: 10, InCall: 6}, 0))
	f.eng.Publish()
	f.do("GET", "/astproxy/extensions", "root", "", "Accept-Encoding", "gzip")
	if got := counterValue(t, f.m, "ctibridge_http_cache_encodings_total", "gzip"); got != 2 {
		t.Errorf("%v gzip encodings after a publish, want 2", got)
	}
}

func TestReadsStale(t *testing.T) {
	f := newFixture(t, false, nil)
	f.eng.SetLink(calls.LinkDown)
	s := f.eng.Publish()
	r := f.do("GET", "/astproxy/extensions", "alice", "")
	if r.status != 200 || r.header.Get("X-Ctibridge-Stale") != "true" {
		t.Errorf("stale read: %d %v", r.status, r.header)
	}
	r = f.do("GET", "/astproxy/status", "alice", "")
	var st struct {
		PBX     string `json:"pbx"`
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil || st.PBX != "down" || st.Version != s.Version {
		t.Errorf("status %s", r.body)
	}
}

// conv finds a conversation of exten in an extensions collection body.
func convOfBody(t *testing.T, body []byte, exten string) map[string]any {
	t.Helper()
	var exts map[string]struct {
		Conversations map[string]map[string]any `json:"conversations"`
	}
	if err := json.Unmarshal(body, &exts); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, c := range exts[exten].Conversations {
		return c
	}
	t.Fatalf("no conversation on %s", exten)
	return nil
}

func TestReadsFilteredByPermission(t *testing.T) {
	f := newFixture(t, false, nil)
	full := f.do("GET", "/astproxy/extensions", "root", "").body
	cases := []struct {
		user       string
		seeExten   map[string]bool // counterpart visible on these extensions' calls
		seeOutside bool            // queue callers, parked callers
	}{
		{"alice", map[string]bool{"2000": true, "2002": false, "2001": false}, false},
		{"bob", map[string]bool{"2000": false, "2001": true}, false},
		{"olga", map[string]bool{"2000": true, "2002": false}, true},
		{"paula", map[string]bool{"2000": true, "2002": true, "2004": true}, true},
		{"root", map[string]bool{"2000": true, "2002": true}, true},
	}
	for _, c := range cases {
		t.Run(c.user, func(t *testing.T) {
			r := f.do("GET", "/astproxy/extensions", c.user, "")
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if c.user == "paula" || c.user == "root" {
				if !bytes.Equal(r.body, full) {
					t.Error("unfiltered view differs from the snapshot")
				}
			}
			for x, see := range c.seeExten {
				conv := convOfBody(t, r.body, x)
				if got := conv["counterpartNum"] != ""; got != see {
					t.Errorf("counterpart of %s visible = %v, want %v (%v)", x, got, see, conv)
				}
				if see == false && conv["counterpartName"] != "" {
					t.Errorf("name of %s's counterpart visible", x)
				}
				if conv["connected"] != true || conv["id"] == "" {
					t.Errorf("presence lost: %v", conv)
				}
			}
			one := f.do("GET", "/astproxy/extension/2002", c.user, "")
			if got := bytes.Contains(one.body, []byte(`"counterpartNum":"2003"`)); got != c.seeExten["2002"] {
				t.Errorf("single extension 2002: counterpart visible %v: %s", got, one.body)
			}
			q := f.do("GET", "/astproxy/queues", c.user, "").body
			if got := bytes.Contains(q, []byte(resttest.QueueNum)); got != c.seeOutside {
				t.Errorf("queue caller visible = %v", got)
			}
			q1 := f.do("GET", "/astproxy/queue/401", c.user, "").body
			if got := bytes.Contains(q1, []byte(resttest.QueueNum)); got != c.seeOutside {
				t.Errorf("queue 401 caller visible = %v", got)
			}
			p := f.do("GET", "/astproxy/parkings", c.user, "").body
			if got := bytes.Contains(p, []byte(resttest.ParkedNum)); got != c.seeOutside {
				t.Errorf("parked caller visible = %v", got)
			}
			var anyJSON any
			for _, b := range [][]byte{r.body, q, q1, p, f.do("GET", "/astproxy/trunks", c.user, "").body} {
				if err := json.Unmarshal(b, &anyJSON); err != nil {
					t.Errorf("invalid JSON: %v", err)
				}
			}
		})
	}
	// Filtered views are made once per (version, view): alice's second
	// read reuses the first.
	before := counterValue(t, f.m, "ctibridge_http_cache_encodings_total", "view")
	f.do("GET", "/astproxy/extensions", "alice", "")
	f.do("GET", "/astproxy/extensions", "alice", "")
	if after := counterValue(t, f.m, "ctibridge_http_cache_encodings_total", "view"); after != before {
		t.Errorf("view encoded again: %v -> %v", before, after)
	}
}

func TestReadsOwnConversations(t *testing.T) {
	f := newFixture(t, false, nil)
	var got map[string]map[string]map[string]any
	r := f.do("GET", "/astproxy/conversations", "alice", "")
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if len(got) != 1 || len(got["2000"]) != 1 {
		t.Fatalf("%s", r.body)
	}
	for id, c := range got["2000"] {
		if id != resttest.Chan(0)+">"+resttest.Chan(1) || c["counterpartNum"] != "2001" {
			t.Errorf("%s: %v", id, c)
		}
	}
	if r := f.do("GET", "/astproxy/conversations", "root", ""); string(r.body) != "{}" {
		t.Errorf("root owns nothing: %s", r.body)
	}
	if r := f.do("GET", "/astproxy/conversations", "paula", ""); string(r.body) != `{"2006":{}}` {
		t.Errorf("paula's idle phone: %s", r.body)
	}
}

func TestEtagMatch(t *testing.T) {
	for _, c := range []struct {
		hdr  string
		want bool
	}{
		{`W/"12"`, true}, {`"12"`, true}, {` "1", W/"12" `, true}, {`*`, true},
		{`"123"`, false}, {`W/"1"`, false}, {`12`, false}, {``, false}, {`"12`, false},
	} {
		if got := etagMatch([]string{c.hdr}, "12"); got != c.want {
			t.Errorf("etagMatch(%q) = %v", c.hdr, got)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, c := range []struct {
		hdr  string
		want bool
	}{
		{"gzip", true}, {"gzip, deflate, br", true}, {"br;q=1.0, GZIP;q=0.5", true}, {"deflate", false},
		{"gzip;q=0", false}, {"gzip; q=0.000", false}, {"x-gzip", false}, {"", false},
	} {
		if got := acceptsGzip([]string{c.hdr}); got != c.want {
			t.Errorf("acceptsGzip(%q) = %v", c.hdr, got)
		}
	}
}

func TestUnknownRoutes(t *testing.T) {
	f := newFixture(t, false, nil)
	if r := f.do("GET", "/nope", "root", ""); r.status != 404 || r.errorCode() != "not_found" {
		t.Errorf("unknown path: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/astproxy/extensions", "root", "{}"); r.status != 405 || r.header.Get("Allow") != "GET" || r.errorCode() != "method_not_allowed" {
		t.Errorf("wrong method: %d %v %s", r.status, r.header, r.body)
	}
	if r := f.do("GET", "/astproxy/call", "root", ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET on an action: %d %s", r.status, r.body)
	}
	// Phonebook and history are routed but answer 503 without a store.
	for _, p := range []string{"/phonebook/search/x", "/historycall/interval/user/a/20260101/20260102"} {
		if r := f.do("GET", p, "root", ""); r.status != 503 {
			t.Errorf("%s: %d", p, r.status)
		}
	}
	r := f.do("GET", "/openapi.yaml", "", "")
	if r.status != 200 || !bytes.Equal(r.body, openAPI) || r.header.Get("Content-Type") != "application/yaml" {
		t.Errorf("openapi: %d %v", r.status, r.header)
	}
}

func TestReadsNeedToken(t *testing.T) {
	f := newFixture(t, false, nil)
	for _, path := range []string{"/astproxy/extensions", "/astproxy/status", "/user/me"} {
		r := f.do("GET", path, "", "")
		if r.status != 401 || r.errorCode() != "no_token" || r.header.Get("Www-Authenticate") == "" {
			t.Errorf("%s without token: %d %s", path, r.status, r.body)
		}
		r = f.do("GET", path, "", "", "Authorization", "Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		if r.status != 401 || r.errorCode() != "bad_token" {
			t.Errorf("%s with a bad token: %d %s", path, r.status, r.body)
		}
		r = f.do("GET", path, "", "", "Authorization", "Basic cm9vdDpzZWNyZXQ=")
		if r.status != 401 {
			t.Errorf("%s with basic auth: %d", path, r.status)
		}
	}
	if r := f.do("GET", "/astproxy/status", "", "", "Authorization", "bearer "+f.tokens["bob"]); r.status != 200 {
		t.Errorf("lower-case scheme: %d", r.status)
	}
}

// TestQueueByNumber: in the recorded queue_answered the caller dials 600
// and waits in app_queue's "support"; both name the queue on the API.
func TestQueueByNumber(t *testing.T) {
	f, err := os.Open("../ami/testdata/queue_answered.ami")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
	r := ami.NewReader(bufio.NewReader(f), ami.ReaderConfig{})
	for {
		m, err := r.ReadMessage()
		if err != nil {
			break
		}
		if m.Event() == "QueueCallerJoin" { // stop while the caller waits
			eng.Apply(m)
			break
		}
		eng.Apply(m)
	}
	eng.Publish()
	fx := newFixture(t, false, func(c *Config) { c.State = engineState{eng} })
	want := eng.Snapshot().QueueJSON("support")
	for _, path := range []string{"/astproxy/queue/support", "/astproxy/queue/600"} {
		if r := fx.do("GET", path, "root", ""); r.status != 200 || !bytes.Equal(r.body, want) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
	if r := fx.do("GET", "/astproxy/queue/601", "root", ""); r.status != 404 {
		t.Errorf("601: %d", r.status)
	}
}
