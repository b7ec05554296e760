package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// BenchmarkExtensionsPBXs reads all extensions, 5,000 with 30 calls, from
// one engine and from two PBXs of 2,500 merged by calls.Multi, and one
// PBX's (?pbx=site2) from the merge: the combined snapshot is a snapshot
// like any other, so the first two should cost the same. The last reads
// site2's as alice, who may not see its calls (the hidden class's bytes
// picked, cached per version like the others).
func BenchmarkExtensionsPBXs(b *testing.B) {
	one := resttest.Engine(resttest.Options{Extensions: 5000, InCall: 30})
	a, s2 := resttest.Engine(resttest.Options{Extensions: 2500, InCall: 15}), resttest.Engine(resttest.Options{Extensions: 2500, InCall: 15})
	multi := calls.NewMulti(0, []string{"", "site2"}, []calls.Source{a, s2})
	for _, c := range []struct {
		name, path, user string
		state            State
		sites            []Site
	}{
		{"single5000", "/astproxy/extensions", "root", one, nil},
		{"multi2x2500", "/astproxy/extensions", "root", multi, []Site{{Name: "site2", State: s2, PBX: nopPBX{}}}},
		{"multi2x2500/pbx=site2", "/astproxy/extensions?pbx=site2", "root", multi, []Site{{Name: "site2", State: s2, PBX: nopPBX{}}}},
		{"multi2x2500/pbx=site2/filtered", "/astproxy/extensions?pbx=site2", "alice", multi, []Site{{Name: "site2", State: s2, PBX: nopPBX{}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			svc := auth.NewService(testUsers(b), auth.Config{})
			h, err := newHandler(Config{Auth: svc, State: c.state, Sites: c.sites, Metrics: NewMetrics(), AccessLogEvery: -1})
			if err != nil {
				b.Fatal(err)
			}
			benchGet(b, h, svc, c.user, c.path)
		})
	}
}

// nopPBX answers every action with success.
type nopPBX struct{}

func (nopPBX) Do(context.Context, ami.Message) (ami.Response, error) { return ami.Response{}, nil }

// TestPBXReadsAlloc holds the ?pbx= reads to zero allocations per request
// once their version's body is made, for a user who sees everything and
// for one who may not see site2's calls: collections, the user's own
// conversations, conferences (also without ?pbx=), the status.
func TestPBXReadsAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, s2 := resttest.Engine(resttest.Options{Extensions: 50, InCall: 5}), resttest.Engine(resttest.Options{Extensions: 50, InCall: 5})
	multi := calls.NewMulti(0, []string{"", "site2"}, []calls.Source{a, s2})
	svc := auth.NewService(testUsers(t), auth.Config{})
	h, err := newHandler(Config{Auth: svc, State: multi, Sites: []Site{{Name: "site2", State: s2, PBX: nopPBX{}}}, Metrics: NewMetrics(), AccessLogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, path string }{
		{"root", "/astproxy/extensions?pbx=site2"},
		{"alice", "/astproxy/extensions?pbx=site2"},
		{"alice", "/astproxy/trunks?pbx=default"},
		{"bob", "/astproxy/queues?x=1&pbx=site2"},
		{"alice", "/astproxy/conversations?pbx=default"},
		{"root", "/astproxy/conferences?pbx=site2"},
		{"alice", "/astproxy/conferences?pbx=default"},
		{"bob", "/astproxy/conferences"},
		{"root", "/astproxy/status?pbx=default"},
	} {
		tok, _, _ := svc.Tokens().Issue(c.user)
		req := httptest.NewRequest("GET", c.path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := &nopWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != 200 {
			t.Fatalf("%s %s: status %d", c.user, c.path, w.status)
		}
		serve := func() { clear(w.h); h.ServeHTTP(w, req) }
		if n := testing.AllocsPerRun(500, serve); n != 0 {
			t.Errorf("%s %s: %v allocations per request", c.user, c.path, n)
		}
	}
}

// BenchmarkPBXReads reads what takes ?pbx= besides the collections, from
// two merged PBXs of 2,500 extensions: the status of one PBX, a user's
// own conversations of one PBX, the conferences of one PBX and of all
// (cached per version like the collections), and the status of a user
// limited to both PBXs.
func BenchmarkPBXReads(b *testing.B) {
	a, s2 := resttest.Engine(resttest.Options{Extensions: 2500, InCall: 15}), resttest.Engine(resttest.Options{Extensions: 2500, InCall: 15})
	multi := calls.NewMulti(0, []string{"", "site2"}, []calls.Source{a, s2})
	var list []auth.User
	for _, u := range testUsers(b).All() {
		list = append(list, *u)
	}
	us, err := auth.NewUsers(append(list, auth.User{Username: "bea", PasswordHash: testHash(), Role: auth.RoleAdmin, PBXs: []string{"default", "site2"}}))
	if err != nil {
		b.Fatal(err)
	}
	svc := auth.NewService(us, auth.Config{})
	h, err := newHandler(Config{Auth: svc, State: multi, Sites: []Site{{Name: "site2", State: s2, PBX: nopPBX{}}}, Metrics: NewMetrics(), AccessLogEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, user, path string }{
		{"status/pbx=default", "root", "/astproxy/status?pbx=default"},
		{"conversations/pbx=default", "alice", "/astproxy/conversations?pbx=default"},
		{"conferences/pbx=site2", "root", "/astproxy/conferences?pbx=site2"},
		{"conferences/filtered", "alice", "/astproxy/conferences"},
		{"status/limited2", "bea", "/astproxy/status"},
	} {
		b.Run(c.name, func(b *testing.B) { benchGet(b, h, svc, c.user, c.path) })
	}
}

// benchGet measures GET path as user on h, once its body is made.
func benchGet(b *testing.B, h *handler, svc *auth.Service, user, path string) {
	tok, _, _ := svc.Tokens().Issue(user)
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status != 200 {
		b.Fatalf("status %d", w.status)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.SetBytes(int64(w.n))
}
