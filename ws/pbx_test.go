package ws

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// twoLivePBXs is the combined state of the default PBX and site2, both
// live, and their engines.
func twoLivePBXs() (def, site2 *calls.Engine, multi *calls.Multi) {
	def, site2 = calls.New(calls.Config{}), calls.New(calls.Config{})
	for _, e := range []*calls.Engine{def, site2} {
		e.SetLink(calls.LinkLive)
		e.Publish()
	}
	return def, site2, calls.NewMulti(0, []string{"", "site2"}, []calls.Source{def, site2})
}

// TestPBXStatusLimited: a client limited to some PBXs (its user's pbxs, or
// its subscribe's) gets the links of those only, in its snapshot ("pbx",
// "stale") and in pbxStatus events, and no event when another PBX's link
// changes; a client of every PBX gets them all. Clients of one PBX set
// share a frame (statusFrame), of another set not: two of rita's, bea of
// both PBXs, and root's subscriptions to one PBX or the other get theirs.
func TestPBXStatusLimited(t *testing.T) {
	def, b, multi := twoLivePBXs()
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "root", PasswordHash: h, Role: auth.RoleAdmin},
		{Username: "rita", PasswordHash: h, Role: auth.RoleAdmin, PBXs: []string{"site2"}},
		{Username: "dora", PasswordHash: h, Role: auth.RoleUser, PBXs: []string{"default"}},
		{Username: "bea", PasswordHash: h, Role: auth.RoleAdmin, PBXs: []string{"default", "site2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(us, auth.Config{})
	hub, err := NewHub(multi, svc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	srv := httptest.NewServer(hub)
	defer func() { cancel(); <-done; hub.Close(); srv.Close() }()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"

	type status struct {
		PBX  string
		PBXs map[string]struct {
			PBX   string
			Stale bool
		}
	}
	decode := func(who string, b []byte) status {
		t.Helper()
		var st status
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: status %s: %v", who, b, err)
		}
		return st
	}
	names := func(st status) []string {
		var out []string
		for k := range st.PBXs {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	// subscribe dials user and subscribes (to pbxs when not nil); it
	// checks the snapshot's status.
	subscribe := func(user string, pbxs []string, wantStale bool, wantTop string, want ...string) *Client {
		t.Helper()
		tok, _, _ := svc.Tokens().Issue(user)
		c, err := Dial(ctx, url, tok)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Next(ctx) // hello
		if pbxs != nil {
			err = c.SubscribePBXs(pbxs, "extensions")
		} else {
			err = c.Subscribe("extensions")
		}
		if err != nil {
			t.Fatal(err)
		}
		snap, err := c.Next(ctx)
		if err != nil || snap.Op != "snapshot" {
			t.Fatalf("%s: %+v %v", user, snap, err)
		}
		st := decode(user, snap.PBX)
		if snap.Stale != wantStale || st.PBX != wantTop || !slices.Equal(names(st), want) {
			t.Fatalf("%s %v: snapshot stale=%v status %s, want stale=%v, %s, links of %v", user, pbxs, snap.Stale, snap.PBX, wantStale, wantTop, want)
		}
		return c
	}
	next := func(who string, c *Client) status {
		t.Helper()
		for {
			m, err := c.Next(ctx)
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			if m.Op == "event" && m.Type == "pbxStatus" {
				return decode(who, m.Data)
			}
		}
	}
	root := subscribe("root", nil, false, "live", "default", "site2")
	rita := subscribe("rita", nil, false, "live", "site2")
	dora := subscribe("dora", nil, false, "live", "default")
	only := subscribe("root", []string{"default"}, false, "live", "default")
	only2 := subscribe("root", []string{"site2"}, false, "live", "site2")
	rita2 := subscribe("rita", nil, false, "live", "site2")
	bea := subscribe("bea", nil, false, "live", "default", "site2")

	// site2 goes down: news to root and rita only.
	b.SetLink(calls.LinkDown)
	b.Publish()
	multi.Sync(1)
	if st := next("root", root); st.PBX != "down" || !slices.Equal(names(st), []string{"default", "site2"}) {
		t.Errorf("root: %+v", st)
	}
	for who, c := range map[string]*Client{"rita": rita, "rita's second": rita2, "root's site2 subscription": only2} {
		if st := next(who, c); st.PBX != "down" || !st.PBXs["site2"].Stale || !slices.Equal(names(st), []string{"site2"}) {
			t.Errorf("%s: %+v", who, st)
		}
	}
	if st := next("bea", bea); st.PBX != "down" || !st.PBXs["site2"].Stale || st.PBXs["default"].Stale || !slices.Equal(names(st), []string{"default", "site2"}) {
		t.Errorf("bea: %+v", st)
	}
	// A new snapshot of the default PBX's readers: live, not stale.
	subscribe("dora", nil, false, "live", "default")
	subscribe("root", []string{"default"}, false, "live", "default")
	subscribe("rita", nil, true, "down", "site2")
	subscribe("root", nil, true, "down", "default", "site2")

	// The default PBX resyncs: the first status dora and the default-only
	// subscription get is that one (site2's was not sent), without site2.
	def.SetLink(calls.LinkResyncing)
	def.Publish()
	multi.Sync(0)
	for who, c := range map[string]*Client{"dora": dora, "root's default subscription": only} {
		if st := next(who, c); st.PBX != "resyncing" || !slices.Equal(names(st), []string{"default"}) {
			t.Errorf("%s: %+v, want the default PBX's resync only", who, st)
		}
	}
	for who, c := range map[string]*Client{"root": root, "bea": bea} {
		if st := next(who, c); st.PBX != "down" || st.PBXs["default"].PBX != "resyncing" || !slices.Equal(names(st), []string{"default", "site2"}) {
			t.Errorf("%s after the default's resync: %+v", who, st)
		}
	}
	// site2 live again: the first status rita's clients get is that one
	// (the default's resync was not sent to them).
	b.SetLink(calls.LinkLive)
	b.Publish()
	multi.Sync(1)
	for who, c := range map[string]*Client{"rita": rita, "rita's second": rita2} {
		if st := next(who, c); st.PBX != "live" || st.PBXs["site2"].Stale || !slices.Equal(names(st), []string{"site2"}) {
			t.Errorf("%s after site2's return: %+v, want site2 live only", who, st)
		}
	}
}

// TestPBXPresenceCellphone: a client of some PBXs (subscribed to some, or
// its user limited to some) gets its PBXs' presence only, with each
// user's cellphone, as a client of all does: a forward to site2:201's
// user's cellphone is "cellphone".
func TestPBXPresenceCellphone(t *testing.T) {
	cf := func(e *calls.Engine) {
		e.Apply(event("DBGetResponse", "Family", "CF", "Key", "201", "Val", "3331234567"))
		e.Publish()
	}
	def := calls.New(calls.Config{Names: map[string]string{"201": "Ada"}})
	b := calls.New(calls.Config{Names: map[string]string{"201": "Sam"}, Cellphones: map[string]string{"201": "3331234567"}})
	cf(def)
	cf(b)
	s := calls.NewMulti(0, []string{"", "site2"}, []calls.Source{def, b}).Snapshot()
	c := &conn{user: &auth.User{Username: "root", Role: auth.RoleAdmin}, pbxs: []string{"site2"}}
	if got, want := string(pbxColl(c, s, calls.UserPresenceUpdate)), `{"site2:201":"cellphone"}`; got != want {
		t.Errorf("site2's presence %s, want %s", got, want)
	}
	if got, want := string(s.PresenceJSON()), `{"201":"callforward","site2:201":"cellphone"}`; got != want {
		t.Errorf("every PBX's presence %s, want %s", got, want)
	}
	dora := &conn{user: &auth.User{Username: "dora", PBXs: []string{"default"}}}
	if got, want := string(pbxColl(dora, s, calls.UserPresenceUpdate)), `{"201":"callforward"}`; got != want {
		t.Errorf("presence of a user limited to the default PBX %s, want %s", got, want)
	}
}

// BenchmarkStatusFrame is a pbxStatus change (site2's link going down)
// as 100 clients limited to site2 get it, and 100 subscribed to it.
func BenchmarkStatusFrame(b *testing.B) {
	_, s2, multi := twoLivePBXs()
	last := multi.Snapshot().Seq
	s2.SetLink(calls.LinkDown)
	s2.Publish()
	multi.Sync(1)
	cs, _ := multi.Feed().Since(last)
	i := slices.IndexFunc(cs, func(c calls.Change) bool { return c.Type == calls.PBXStatus })
	if i < 0 {
		b.Fatal("no pbxStatus change")
	}
	us, err := auth.NewUsers([]auth.User{
		{Username: "root", PasswordHash: testHash(), Role: auth.RoleAdmin},
		{Username: "rita", PasswordHash: testHash(), Role: auth.RoleAdmin, PBXs: []string{"site2"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	root, _ := us.Lookup("root")
	rita, _ := us.Lookup("rita")
	var conns []*conn
	for range 100 {
		conns = append(conns, &conn{user: rita}, &conn{user: root, pbxs: []string{"site2"}})
	}
	b.ReportAllocs()
	for b.Loop() {
		p := prep{ch: &cs[i], kind: calls.PBXStatus, full: &frame{seq: cs[i].Seq}}
		for _, c := range conns {
			if statusFrame(c, &p) == nil {
				b.Fatal("no news")
			}
		}
	}
}
