package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// marker toggles extension 299 so that the last change is one every
// extensions subscriber receives; it returns the snapshot.
func (e *env) marker() *calls.Snapshot {
	e.markerBusy = !e.markerBusy
	return e.apply(devState("299", e.markerBusy))
}

func TestAuthPaths(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{AuthTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	t.Run("header", func(t *testing.T) {
		c := e.dial("alice")
		if m := expectOp(t, c, "hello"); m.Epoch != e.hub.Epoch() || !strings.Contains(string(m.User), `"username":"alice"`) {
			t.Errorf("hello %+v", m)
		}
	})
	t.Run("query", func(t *testing.T) {
		c, err := Dial(ctx, e.url+"?token="+e.token("bob"), "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expectOp(t, c, "hello")
	})
	t.Run("first message", func(t *testing.T) {
		c, err := Dial(ctx, e.url, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Auth(e.token("olga"))
		expectOp(t, c, "hello")
		c.Ping()
		expectOp(t, c, "pong")
	})
	t.Run("none within the timeout", func(t *testing.T) {
		c, err := Dial(ctx, e.url, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		expectClose(t, c, CloseNoToken)
		if d := time.Since(start); d < 150*time.Millisecond || d > 5*time.Second {
			t.Errorf("closed after %v, want about 200ms", d)
		}
	})
	t.Run("subscribe before auth", func(t *testing.T) {
		c, _ := Dial(ctx, e.url, "")
		defer c.Close()
		c.Subscribe("extensions")
		expectClose(t, c, CloseNoToken)
	})
	t.Run("bad token at upgrade", func(t *testing.T) {
		c, err := Dial(ctx, e.url, "not-a-token")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expectClose(t, c, CloseAuthFailed)
	})
	t.Run("bad token as first message", func(t *testing.T) {
		c, _ := Dial(ctx, e.url, "")
		defer c.Close()
		c.Auth(strings.Repeat("x", 43))
		expectClose(t, c, CloseAuthFailed)
	})
	t.Run("unknown op", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Send(map[string]string{"op": "dance"})
		expectClose(t, c, CloseProtocolError)
	})
	t.Run("unknown topic", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Subscribe("extensions", "weather")
		expectClose(t, c, CloseProtocolError)
	})
	t.Run("deltas of a topic that has none", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.SubscribeWith(Sub{Topics: []string{"extensions"}, Deltas: []string{"extensions"}})
		expectClose(t, c, CloseProtocolError)
	})
	t.Run("deltas of trunks and queues", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.SubscribeWith(Sub{Topics: []string{"queues", "trunks"}, Deltas: []string{"trunks", "queues"}})
		expectOp(t, c, "snapshot")
	})
	t.Run("not JSON", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.c.WriteMessage(1, []byte("hello?"))
		expectClose(t, c, CloseProtocolError)
	})
}

func TestTokenExpiryAndRenewal(t *testing.T) {
	// Long enough that a loaded machine gets through dial, hello, subscribe
	// and snapshot well inside it; the renewal comes at a third of it.
	const ttl = 1200 * time.Millisecond
	e := newEnv(t, calls.Config{}, auth.Config{TokenTTL: ttl}, Config{})
	t.Run("expired at upgrade", func(t *testing.T) {
		tok := e.token("alice")
		time.Sleep(ttl + 50*time.Millisecond)
		c, err := Dial(context.Background(), e.url, tok)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expectClose(t, c, CloseTokenExpired)
	})
	t.Run("expires while connected", func(t *testing.T) {
		start := time.Now()
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Subscribe("extensions")
		expectOp(t, c, "snapshot")
		expectClose(t, c, CloseTokenExpired)
		if d := time.Since(start); d < ttl-100*time.Millisecond {
			t.Errorf("closed after %v, before the expiry", d)
		}
	})
	t.Run("renewed in place", func(t *testing.T) {
		c := e.dial("alice")
		hello := expectOp(t, c, "hello")
		c.Subscribe("extensions")
		expectOp(t, c, "snapshot")
		time.Sleep(ttl / 3)
		c.Auth(e.token("alice"))
		m := expectOp(t, c, "renewed")
		if m.ExpiresAt <= hello.ExpiresAt {
			t.Errorf("renewed expiry %d not after %d", m.ExpiresAt, hello.ExpiresAt)
		}
		// Past the first token's expiry the connection still works.
		time.Sleep(time.Until(time.UnixMilli(hello.ExpiresAt)) + 100*time.Millisecond)
		s := e.marker()
		var mr mirror
		mr.colls = map[string]map[string]string{}
		mr.readUntil(t, c, s.Seq)
		expectClose(t, c, CloseTokenExpired) // the renewed one expires too
	})
	t.Run("renewal with another user's token", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Auth(e.token("bob"))
		expectClose(t, c, CloseAuthFailed)
	})
}

// TestSnapshotThenEvents replays a recording while a client listens, and
// checks that its mirror equals the engine's state.
func TestSnapshotThenEvents(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		t.Run(fmt.Sprintf("deltas=%v", deltas), func(t *testing.T) { testSnapshotThenEvents(t, deltas) })
	}
}

func testSnapshotThenEvents(t *testing.T, deltas bool) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	c := e.dial("paula")
	expectOp(t, c, "hello")
	sub := Sub{Topics: []string{"extensions", "queues", "parkings", "trunks"}}
	if deltas {
		sub.Deltas = []string{"trunks"}
	}
	c.SubscribeWith(sub)
	var m mirror
	m.apply(t, expectOp(t, c, "snapshot"))
	for _, msg := range loadRecording(t, "queue_answered") {
		e.apply(msg)
	}
	s := e.marker()
	m.readUntil(t, c, s.Seq)
	checkMirror(t, &m, s, nil)
}

// checkMirror compares a client's mirror with a snapshot as the user (nil:
// everything) sees it through auth.View, as REST shows it.
func checkMirror(t *testing.T, m *mirror, s *calls.Snapshot, u *auth.User) {
	t.Helper()
	v := auth.ViewOf(u)
	want := map[string]map[string]string{"extensions": {}, "trunks": {}, "parkings": {}}
	class := func(owner string) calls.Class {
		if u == nil {
			return calls.Full
		}
		return v.Class(owner)
	}
	for k := range s.Extensions.All() {
		want["extensions"][k] = compact(t, s.ExtensionJSONAs(k, class(k)))
	}
	for k := range s.Trunks.All() {
		want["trunks"][k] = compact(t, s.TrunkJSONAs(k, class("")))
	}
	for k := range s.Parkings {
		want["parkings"][k] = compact(t, s.ParkingJSONAs(k, class("")))
	}
	for name, w := range want {
		got := m.colls[name]
		for k, wv := range w {
			if g, ok := got[k]; name == "trunks" && ok && normTrunk(t, g) == normTrunk(t, wv) {
				continue
			}
			if got[k] != wv {
				t.Errorf("%s[%s]:\n got %s\nwant %s", name, k, got[k], wv)
			}
		}
		for k := range got {
			if _, ok := w[k]; !ok {
				t.Errorf("%s[%s] should not exist", name, k)
			}
		}
	}
}

// TestResume disconnects a client, makes n changes, and resumes: inside
// the replay buffer it gets exactly the missed events, outside a snapshot;
// either way its state ends equal to the snapshot of the same version.
func TestResume(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		t.Run(fmt.Sprintf("deltas=%v", deltas), func(t *testing.T) { testResume(t, deltas) })
	}
}

// testResume is TestResume for a client taking trunk deltas or not.
func testResume(t *testing.T, deltas bool) {
	subscribe := func(c *Client, epoch string, since uint64, topics ...string) {
		s := Sub{Topics: topics, Epoch: epoch}
		if epoch != "" {
			s.Since = &since
		}
		if deltas {
			s.Deltas = []string{"trunks"}
		}
		c.SubscribeWith(s)
	}
	const buf = 64
	e := newEnv(t, calls.Config{FeedSize: buf}, auth.Config{}, Config{ReplayMax: buf})
	rec := loadRecording(t, "load_10_calls_5cps")
	pos := 0
	for _, n := range []int{0, 1, 10, buf - 1, buf, buf + 1, 3 * buf} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := e.dial("alice")
			expectOp(t, c, "hello")
			subscribe(c, "", 0, "extensions", "trunks", "parkings")
			var m mirror
			s := e.marker()
			m.readUntil(t, c, s.Seq)
			c.Close()

			// n changes: recording messages while they last, then toggles.
			last := s.Seq
			for e.eng.Feed().LastSeq() < last+uint64(n) {
				if pos < len(rec) {
					e.eng.Apply(rec[pos])
				} else {
					i := pos - len(rec)
					e.eng.Apply(devState(fmt.Sprint(250+i%20), i%40 < 20))
				}
				pos++
				e.eng.Publish()
			}
			missed := e.eng.Feed().LastSeq() - last

			c2 := e.dial("alice")
			expectOp(t, c2, "hello")
			subscribe(c2, m.epoch, m.seq, "extensions", "trunks", "parkings")
			first := next(t, c2)
			inBuffer := missed <= buf
			if inBuffer && first.Op != "resumed" || !inBuffer && first.Op != "snapshot" {
				t.Fatalf("%d missed changes (buffer %d): first message is %q", missed, buf, first.Op)
			}
			m.seqs = nil
			m.apply(t, first)
			s = e.marker()
			m.readUntil(t, c2, s.Seq)
			checkMirror(t, &m, s, e.user("alice"))
		})
	}
	t.Run("wrong epoch", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Resume("another-server", e.eng.Feed().LastSeq(), "extensions")
		expectOp(t, c, "snapshot")
	})
	t.Run("ahead of the feed", func(t *testing.T) {
		c := e.dial("alice")
		expectOp(t, c, "hello")
		c.Resume(e.hub.Epoch(), e.eng.Feed().LastSeq()+100, "extensions")
		expectOp(t, c, "snapshot")
	})
}

func (e *env) user(name string) *auth.User {
	u, ok := e.auth.Users().Lookup(name)
	if !ok {
		e.t.Fatalf("no user %s", name)
	}
	return u
}

// TestPermissions replays a call from 201 to 202 and checks what each
// user receives: counterpart numbers only where REST would show them,
// extenRinging only to the rung extension's owner.
func TestPermissions(t *testing.T) {
	e := newEnv(t, calls.Config{Names: map[string]string{"203": "Olga", "204": "Dave", "205": "Paula"}}, auth.Config{}, Config{})
	users := []string{"alice", "bob", "olga", "dave", "paula", "root"}
	clients := map[string]*Client{}
	mirrors := map[string]*mirror{}
	for _, u := range users {
		c := e.dial(u)
		expectOp(t, c, "hello")
		c.Subscribe("extensions", "trunks", "me")
		m := &mirror{}
		m.apply(t, expectOp(t, c, "snapshot"))
		clients[u], mirrors[u] = c, m
	}
	var leaks []string
	sawNum := map[string]bool{}
	// Every client catches up after each message, so that coalescing
	// (which depends on timing) cannot hide the states checked below.
	read := func(u string, upTo uint64) {
		m, c := mirrors[u], clients[u]
		for m.seq < upTo {
			msg := next(t, c)
			m.apply(t, msg)
			if msg.Op != "event" || msg.Type != "extenUpdate" {
				continue
			}
			var x calls.Extension
			if err := json.Unmarshal(msg.Data, &x); err != nil {
				t.Fatal(err)
			}
			for _, cv := range x.Conversations {
				if cv.CounterpartNum != "" {
					sawNum[u+"/"+x.Exten] = true
					if !auth.Allowed(e.user(u), auth.SeeCalls, x.Exten) {
						leaks = append(leaks, fmt.Sprintf("%s saw %s's counterpart %s", u, x.Exten, cv.CounterpartNum))
					}
				}
			}
		}
	}
	var s *calls.Snapshot
	for _, msg := range loadRecording(t, "basic_call_caller_hangup") {
		e.apply(msg)
		s = e.marker()
		for _, u := range users {
			read(u, s.Seq)
		}
	}
	for _, u := range users {
		checkMirror(t, mirrors[u], s, e.user(u))
	}
	// Intermediate states may lack a counterpart (the engine learns it a
	// little later), so only "seen at some point" is asserted.
	for _, want := range []string{"alice/201", "paula/201", "paula/202", "root/201", "root/202", "bob/202"} {
		if !sawNum[want] {
			t.Errorf("%s never saw the counterpart of that extension's call", want)
		}
	}
	for _, l := range leaks {
		t.Error(l)
	}
	for _, u := range users {
		got := len(mirrors[u].ringing)
		if want := u == "bob"; (got > 0) != want {
			t.Errorf("%s received %d extenRinging events (%v), want them only for bob", u, got, mirrors[u].ringing)
		}
	}
	if r := mirrors["bob"].ringing; len(r) > 0 && !strings.Contains(r[0], `"callerNum":"201"`) {
		t.Errorf("bob's ringing event: %s", r[0])
	}
}

// TestPbxStatus: link changes reach clients as pbxStatus, and snapshots
// are stale while the link is not live.
func TestPbxStatus(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	c := e.dial("dave")
	expectOp(t, c, "hello")
	c.Subscribe("me")
	if m := expectOp(t, c, "snapshot"); !m.Stale || !strings.Contains(string(m.PBX), `"pbx":"down"`) {
		t.Errorf("initial snapshot: stale %v pbx %s", m.Stale, m.PBX)
	}
	e.eng.SetLink(calls.LinkResyncing)
	e.eng.Publish()
	ev := expectOp(t, c, "event")
	if ev.Type != "pbxStatus" || !strings.Contains(string(ev.Data), `"resyncing"`) {
		t.Errorf("event %s %s", ev.Type, ev.Data)
	}
	c2 := e.dial("dave")
	expectOp(t, c2, "hello")
	c2.Subscribe("extensions")
	if m := expectOp(t, c2, "snapshot"); !m.Stale {
		t.Error("snapshot during resync is not stale")
	}
	e.eng.EndResync()
	e.eng.Publish()
	for _, cl := range []*Client{c, c2} {
		ev := expectOp(t, cl, "event")
		if ev.Type != "pbxStatus" || !strings.Contains(string(ev.Data), `"live"`) {
			t.Errorf("event %s %s", ev.Type, ev.Data)
		}
	}
	c3 := e.dial("dave")
	expectOp(t, c3, "hello")
	c3.Subscribe("queues")
	if m := expectOp(t, c3, "snapshot"); m.Stale {
		t.Error("snapshot after resync is stale")
	}
}

func TestShutdownGoingAway(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	var cs []*Client
	for _, u := range []string{"alice", "bob", "root"} {
		c := e.dial(u)
		expectOp(t, c, "hello")
		cs = append(cs, c)
	}
	cs[0].Subscribe("extensions")
	expectOp(t, cs[0], "snapshot")
	done := make(chan struct{})
	go func() { e.hub.Close(); close(done) }()
	for _, c := range cs {
		expectClose(t, c, CloseGoingAway)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_, err := Dial(context.Background(), e.url, e.token("alice"))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(http.StatusServiceUnavailable)) {
		t.Errorf("dial after Close: %v", err)
	}
	if n := len(e.hub.conns); n != 0 {
		t.Errorf("%d connections left", n)
	}
	var ce interface{ Error() string }
	_ = errors.As(err, &ce)
}

// wrappedListener hands out connections that are not *net.TCPConn, as
// rest's pipelining listener does: the writer must still work.
type wrappedListener struct{ net.Listener }

type wrappedConn struct{ net.Conn }

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

func TestWrappedConn(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.hub}
	go srv.Serve(wrappedListener{ln})
	t.Cleanup(func() { srv.Close() })
	c, err := Dial(context.Background(), "ws://"+ln.Addr().String()+"/ws", e.token("root"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectOp(t, c, "hello")
	c.Subscribe("extensions", "trunks")
	var m mirror
	m.apply(t, expectOp(t, c, "snapshot"))
	for _, msg := range loadRecording(t, "hold_unhold") {
		e.apply(msg)
	}
	s := e.marker()
	m.readUntil(t, c, s.Seq)
	checkMirror(t, &m, s, nil)
}
