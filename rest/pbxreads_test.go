package rest

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/history"
)

// twoSites is a handler over a default PBX and site2, both fed the
// confbridge_actions recording up to its third member (room 1000 with
// 201, 202, 203 in it), and users: root (admin), ada (201), sam
// (site2:201), rita (an admin limited to site2), bea (an admin limited to
// both).
type twoSites struct {
	t      *testing.T
	def, b *calls.Engine
	multi  *calls.Multi
	h      *handler
	tokens map[string]string
}

func newTwoSites(t *testing.T, mods ...func(*Config)) *twoSites {
	t.Helper()
	ts := &twoSites{t: t, tokens: map[string]string{}}
	msgs := amitest.ReadRecording(t, "../calls/testdata/confbridge_actions.ami")
	eng := func() *calls.Engine {
		e := calls.New(calls.Config{Opaque: auth.Opaquer{}})
		e.SetLink(calls.LinkLive)
		for _, m := range msgs {
			e.Apply(m)
			if m.Event() == "ConfbridgeJoin" && m.Get("Channel") == "PJSIP/203-0000000d" {
				break
			}
		}
		e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "MessageWaiting"}, ami.Header{Key: "Mailbox", Value: "202@default"},
			ami.Header{Key: "New", Value: "2"}, ami.Header{Key: "Old", Value: "0"}))
		e.Publish()
		return e
	}
	ts.def, ts.b = eng(), eng()
	ts.multi = calls.NewMulti(0, []string{"", "site2"}, []calls.Source{ts.def, ts.b})
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "root", PasswordHash: h, Role: auth.RoleAdmin},
		{Username: "ada", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"201"}},
		{Username: "sam", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"site2:201"}},
		{Username: "rita", PasswordHash: h, Role: auth.RoleAdmin, PBXs: []string{"site2"}},
		{Username: "bea", PasswordHash: h, Role: auth.RoleAdmin, PBXs: []string{"default", "site2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(us, auth.Config{})
	for _, u := range []string{"root", "ada", "sam", "rita", "bea"} {
		ts.tokens[u], _, _ = svc.Tokens().Issue(u)
	}
	cfg := Config{Auth: svc, State: ts.multi, Sites: []Site{{Name: "site2", State: ts.b, PBX: nopPBX{}}},
		Metrics: NewMetrics(), AccessLogEvery: -1, HistoryLocation: time.UTC}
	for _, m := range mods {
		m(&cfg)
	}
	ts.h, err = newHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func (ts *twoSites) get(user, path string) *httptest.ResponseRecorder {
	ts.t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+ts.tokens[user])
	w := httptest.NewRecorder()
	ts.h.ServeHTTP(w, req)
	return w
}

// keysOf is the sorted keys of a JSON object.
func keysOf(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPBXReadsCover: with site2's link down, a read says stale and shows
// links for the PBXs it covers only (its ?pbx=, its user's PBXs, its one
// entity); conversations, conferences and the voicemail counters take
// ?pbx= as the collections do, and a limited user reads no other PBX's
// forwards or DND.
func TestPBXReadsCover(t *testing.T) {
	ts := newTwoSites(t)
	ts.b.SetLink(calls.LinkDown)
	ts.b.Publish()
	ts.multi.Sync(1)

	type status struct {
		PBX  string
		PBXs map[string]struct{ PBX string }
	}
	for _, c := range []struct {
		user, path, top string
		pbxs            []string
		stale           bool
	}{
		{"root", "/astproxy/status", "down", []string{"default", "site2"}, true},
		{"root", "/astproxy/status?pbx=default", "live", []string{"default"}, false},
		{"root", "/astproxy/status?pbx=site2", "down", []string{"site2"}, true},
		{"rita", "/astproxy/status", "down", []string{"site2"}, true},
		{"ada", "/astproxy/status?pbx=default", "live", []string{"default"}, false},
	} {
		w := ts.get(c.user, c.path)
		var st status
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &st) != nil {
			t.Fatalf("%s %s: %d %s", c.user, c.path, w.Code, w.Body)
		}
		if st.PBX != c.top || !slices.Equal(keysOf(t, mustField(t, w.Body.Bytes(), "pbxs")), c.pbxs) {
			t.Errorf("%s %s: %s, want top %s and the links of %v", c.user, c.path, w.Body, c.top, c.pbxs)
		}
		if got := w.Header().Get("X-Ctibridge-Stale") == "true"; got != c.stale {
			t.Errorf("%s %s: stale header %v, want %v", c.user, c.path, got, c.stale)
		}
	}
	for _, c := range []struct {
		user, path string
		keys       []string
		stale      bool
	}{
		{"root", "/astproxy/extensions?pbx=default", []string{"201", "202", "203"}, false},
		{"root", "/astproxy/extensions?pbx=site2", []string{"site2:201", "site2:202", "site2:203"}, true},
		{"root", "/astproxy/queues?pbx=default", []string{"support"}, false},
		{"rita", "/astproxy/extensions", []string{"site2:201", "site2:202", "site2:203"}, true},
		{"root", "/astproxy/conferences", []string{"1000", "site2:1000"}, true},
		{"root", "/astproxy/conferences?pbx=default", []string{"1000"}, false},
		{"root", "/astproxy/conferences?pbx=site2", []string{"site2:1000"}, true},
		{"rita", "/astproxy/conferences", []string{"site2:1000"}, true},
		{"ada", "/astproxy/conferences?pbx=default", []string{"1000"}, false},
		{"ada", "/astproxy/conferences?pbx=site2", nil, true},
		{"sam", "/astproxy/conversations", []string{"site2:201"}, true},
		{"sam", "/astproxy/conversations?pbx=site2", []string{"site2:201"}, true},
		{"sam", "/astproxy/conversations?pbx=default", nil, false},
		{"ada", "/astproxy/conversations?pbx=default", []string{"201"}, false},
		{"ada", "/astproxy/conversations?pbx=site2", nil, true},
		{"root", "/voicemail/new_counters", []string{"202", "site2:202"}, true},
		{"root", "/voicemail/new_counters?pbx=default", []string{"202"}, false},
		{"rita", "/voicemail/new_counters", []string{"site2:202"}, true},
	} {
		w := ts.get(c.user, c.path)
		if w.Code != 200 {
			t.Fatalf("%s %s: %d %s", c.user, c.path, w.Code, w.Body)
		}
		if got := keysOf(t, w.Body.Bytes()); !slices.Equal(got, c.keys) {
			t.Errorf("%s %s: %v, want %v", c.user, c.path, got, c.keys)
		}
		if got := w.Header().Get("X-Ctibridge-Stale") == "true"; got != c.stale {
			t.Errorf("%s %s: stale header %v, want %v", c.user, c.path, got, c.stale)
		}
	}
	// One entity: its PBX's link.
	for path, stale := range map[string]bool{"/astproxy/extension/201": false, "/astproxy/extension/site2:201": true,
		"/astproxy/conference/1000": false, "/astproxy/conference/site2:1000": true} {
		if w := ts.get("root", path); w.Code != 200 || (w.Header().Get("X-Ctibridge-Stale") == "true") != stale {
			t.Errorf("GET %s: %d, stale header %q, want %v", path, w.Code, w.Header().Get("X-Ctibridge-Stale"), stale)
		}
	}
	for _, c := range []struct{ user, path string }{
		{"root", "/astproxy/conversations?pbx=site9"},
		{"root", "/astproxy/conferences?pbx=site9"},
		{"root", "/astproxy/status?pbx=site9"},
		{"rita", "/astproxy/status?pbx=default"},
		{"rita", "/astproxy/conference/1000"},
		{"rita", "/astproxy/conversations?pbx=default"},
		{"rita", "/astproxy/cfcall/unconditional/201"},
		{"rita", "/astproxy/dnd/201"},
	} {
		if w := ts.get(c.user, c.path); w.Code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", c.user, c.path, w.Code, w.Body)
		}
	}
	// Both live again: nothing stale, whatever the read.
	ts.b.SetLink(calls.LinkLive)
	ts.b.Publish()
	ts.multi.Sync(1)
	for _, path := range []string{"/astproxy/extensions", "/astproxy/extensions?pbx=site2", "/astproxy/status?pbx=site2", "/astproxy/conferences?pbx=site2"} {
		if w := ts.get("root", path); w.Code != 200 || w.Header().Get("X-Ctibridge-Stale") != "" || strings.Contains(w.Body.String(), `"down"`) {
			t.Errorf("GET %s live: %d %q %s", path, w.Code, w.Header().Get("X-Ctibridge-Stale"), w.Body)
		}
	}
}

func mustField(t *testing.T, body []byte, field string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m[field] == nil {
		t.Fatalf("no %q in %s", field, body)
	}
	return m[field]
}

// TestPBXReadsLimitedAlloc: a limited user's reads (status, collections,
// conferences), of one PBX or of two, and a user's own conversations of
// one PBX allocate nothing once their version's body is made; users
// limited to different PBXs do not share one.
func TestPBXReadsLimitedAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ts := newTwoSites(t)
	for _, c := range []struct{ user, path string }{
		{"rita", "/astproxy/status"},
		{"rita", "/astproxy/extensions"},
		{"rita", "/astproxy/conferences"},
		{"bea", "/astproxy/status"},
		{"bea", "/astproxy/extensions"},
		{"bea", "/astproxy/conferences"},
		{"bea", "/astproxy/extensions?pbx=site2"},
		{"sam", "/astproxy/conversations?pbx=site2"},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		req.Header.Set("Authorization", "Bearer "+ts.tokens[c.user])
		w := &nopWriter{h: http.Header{}}
		ts.h.ServeHTTP(w, req)
		if w.status != 200 {
			t.Fatalf("%s %s: status %d", c.user, c.path, w.status)
		}
		if n := testing.AllocsPerRun(500, func() { clear(w.h); ts.h.ServeHTTP(w, req) }); n != 0 {
			t.Errorf("%s %s: %v allocations per request", c.user, c.path, n)
		}
	}
	// Both cached now: each still gets its own PBXs' extensions.
	for user, want := range map[string][]string{"rita": {"site2:201", "site2:202", "site2:203"}, "bea": {"201", "202", "203", "site2:201", "site2:202", "site2:203"}} {
		w := ts.get(user, "/astproxy/extensions")
		var m map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v %s", user, err, w.Body)
		}
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			t.Errorf("%s's extensions %v, want %v", user, got, want)
		}
	}
}

// TestPBXHistory: a user limited to some PBXs reads the switchboard
// history of those only (a named PBX's calls by their qualified
// uniqueid); a user of every PBX reads all.
func TestPBXHistory(t *testing.T) {
	hs := history.NewSQLite(dbtest.SQLite(t, history.Schema), history.Config{MaxWindow: 31 * 24 * time.Hour})
	day := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	if err := hs.Insert(context.Background(), []history.CDR{
		{CallDate: day, Src: "201", Dst: "202", Disposition: "ANSWERED", UniqueID: "1772441000.1", LinkedID: "1772441000.1"},
		{CallDate: day.Add(time.Hour), Src: "site2:201", Dst: "site2:202", Disposition: "ANSWERED", UniqueID: "site2:1772441000.1", LinkedID: "site2:1772441000.1"},
	}); err != nil {
		t.Fatal(err)
	}
	ts := newTwoSites(t, func(c *Config) { c.History = hs })
	for user, want := range map[string][]string{"root": {"site2:1772441000.1", "1772441000.1"}, "rita": {"site2:1772441000.1"}} {
		w := ts.get(user, "/histcallswitch/interval/20260302/20260302")
		var p struct{ Rows []struct{ LinkedID string } }
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &p) != nil {
			t.Fatalf("%s: %d %s", user, w.Code, w.Body)
		}
		var got []string
		for _, r := range p.Rows {
			got = append(got, r.LinkedID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s's switchboard history %v, want %v", user, got, want)
		}
	}
}
