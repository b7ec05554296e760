package ws

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// subscribe has the bare hub serve a subscribe request of c.
func (h *Hub) subscribe(c *conn, req subReq) {
	c.mu.Lock()
	c.sub = &req
	c.mu.Unlock()
	h.handle(ctlMsg{kind: ctlSubscribe, c: c})
}

// queued counts c's queued frames by kind.
func (c *conn) queued() map[frameKind]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[frameKind]int{}
	for _, f := range c.q {
		if f != nil {
			n[f.kind]++
		}
	}
	return n
}

// TestSubscribeReplacesQueued: subscribing or resuming again while a
// snapshot, a replay or events are queued replaces them all; the replies
// queued meanwhile stay.
func TestSubscribeReplacesQueued(t *testing.T) {
	eng := calls.New(calls.Config{})
	h := bareHub(t, eng, testUsers(t))
	c := h.addFake(h.auth.(*auth.Service).Users().All()[0], 0)
	c.subscribed = false
	c.pushReply(pongBytes, entPong)
	k := 0
	publish := func(n int) {
		for range n {
			k++
			eng.Apply(devState(fmt.Sprint(200+k%10), k/10%2 == 0))
			eng.Publish()
		}
		cs, _ := eng.Feed().Since(h.last)
		h.fanout(cs)
		h.last = cs[len(cs)-1].Seq
	}
	publish(5)
	for i := range 100 {
		req := subReq{topics: topicExtensions}
		if i%3 == 1 {
			req.resume, req.since = true, h.last-3
		}
		h.subscribe(c, req)
		publish(2)
		got := c.queued()
		if got[frameSnapshot]+got[frameResumed] != 1 || got[frameReply] != 1 {
			t.Fatalf("after subscribe %d: queued %v, want one snapshot or resumed and the pong", i, got)
		}
		if got[frameEvent] > 2+3 {
			t.Fatalf("after subscribe %d: %d events queued", i, got[frameEvent])
		}
	}
	// What is left is a consistent stream: the last subscription's
	// snapshot (or resumed) first, then events after it, in order.
	q := c.take()
	if q[0].kind != frameReply {
		t.Fatalf("the pong is not first")
	}
	for i := 2; i < len(q); i++ {
		if q[i].kind != frameEvent || q[i].seq <= q[i-1].seq && q[i-1].kind == frameEvent {
			t.Fatalf("frame %d: kind %d seq %d after seq %d", i, q[i].kind, q[i].seq, q[i-1].seq)
		}
	}
}

// TestResumeReplaysLatestOnly: a resume prepares one frame per entity,
// however long the replay.
func TestResumeReplaysLatestOnly(t *testing.T) {
	eng := calls.New(calls.Config{})
	h := bareHub(t, eng, testUsers(t))
	c := h.addFake(h.auth.(*auth.Service).Users().All()[0], 0)
	since := eng.Feed().LastSeq()
	for i := range 1000 {
		eng.Apply(devState(fmt.Sprint(200+i%10), i%20 < 10))
		eng.Publish()
	}
	h.last = eng.Feed().LastSeq()
	h.subscribe(c, subReq{topics: topicExtensions, resume: true, since: since})
	if len(h.latest) != 10 {
		t.Fatalf("a replay of 1,000 changes to 10 extensions prepared %d frames", len(h.latest))
	}
	q := c.take()
	if len(q) != 11 || q[0].kind != frameResumed || q[10].seq != h.last {
		t.Fatalf("queued %d frames, want resumed and the 10 latest", len(q))
	}
}

// floodBurst is the budget of TestFlood's clients: the flooder is served
// that many pings, or a fifth as many subscribes, before it is closed.
const floodBurst = 200

// floodEnv is a hub with three well-behaved clients that watch the state.
type floodEnv struct {
	*env
	watchers []*Client
	mirrors  []*mirror
}

func newFloodEnv(t *testing.T) *floodEnv {
	e := &floodEnv{env: newEnv(t, calls.Config{}, auth.Config{}, Config{ClientRate: 10, ClientBurst: floodBurst, CloseWait: 300 * time.Millisecond})}
	for range 3 {
		c := e.dial("root")
		expectOp(t, c, "hello")
		c.Subscribe("extensions", "trunks")
		m := &mirror{}
		m.apply(t, expectOp(t, c, "snapshot"))
		e.watchers = append(e.watchers, c)
		e.mirrors = append(e.mirrors, m)
	}
	return e
}

// connOf finds the server side of user's one connection.
func (e *env) connOf(user string) *conn {
	e.hub.mu.Lock()
	defer e.hub.mu.Unlock()
	for c := range e.hub.conns {
		c.mu.Lock() // user was set before the hello was queued under mu
		u := c.user
		c.mu.Unlock()
		if u != nil && u.Username == user {
			return c
		}
	}
	return nil
}

// TestFlood: a client that loops subscribe, resume or ping (a message or
// a WebSocket ping) is closed with 4008 once past its budget; garbage is
// closed with 4004 at once. Meanwhile its queue never holds more than one
// snapshot and a few frames, and the other clients get every change, in
// order.
func TestFlood(t *testing.T) {
	for _, op := range []string{"subscribe", "resume", "ping", "wsping", "garbage"} {
		t.Run(op, func(t *testing.T) {
			e := newFloodEnv(t)
			fl := e.dial("bob")
			hello := expectOp(t, fl, "hello")
			var msg []byte
			switch op {
			case "subscribe":
				msg = []byte(`{"op":"subscribe","topics":["extensions","queues","me"]}`)
			case "resume":
				msg = []byte(`{"op":"subscribe","topics":["extensions"],"since":1,"epoch":"` + hello.Epoch + `"}`)
			case "ping":
				msg = []byte(`{"op":"ping"}`)
			case "garbage":
				msg = []byte(`{"op":`)
			}
			srv := e.connOf("bob")
			var wg sync.WaitGroup
			stop := make(chan struct{})
			maxLive, maxSnaps := 0, 0
			wg.Go(func() { // the flooder's queue, sampled
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
					q := srv.queued()
					srv.mu.Lock()
					maxLive = max(maxLive, srv.live)
					srv.mu.Unlock()
					maxSnaps = max(maxSnaps, q[frameSnapshot]+q[frameResumed])
				}
			})
			// Changes while it floods: 100 extensions once each, so a
			// watcher that misses one cannot make up for it.
			wg.Go(func() {
				for i := range 100 {
					e.apply(devState(fmt.Sprint(300+i), true))
					time.Sleep(200 * time.Microsecond)
				}
			})
			// The flooder writes and does not read until it is done: the
			// server reads on (and discards once it has closed it).
			sent := 0
			for ; sent < 10*floodBurst; sent++ {
				var err error
				if op == "wsping" {
					err = fl.c.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(5*time.Second))
				} else {
					err = fl.WriteRaw(msg)
				}
				if err != nil {
					break
				}
			}
			want := CloseTooMany
			if op == "garbage" {
				want = CloseProtocolError
			}
			fl.SetReadDeadline(time.Now().Add(10 * time.Second))
			code := 0
			for {
				if _, err := fl.ReadRaw(); err != nil {
					code = CloseCode(err)
					break
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("flooder closed with %d; its queue peaked at %d frames, %d snapshot", code, maxLive, maxSnaps)
			if code != want {
				t.Errorf("flooder closed with %d after %d messages, want %d", code, sent, want)
			}
			// At most: one frame per entity changed, the snapshot (or
			// resumed) and the replies (hello, pong, WebSocket pong).
			if maxSnaps > 1 || maxLive > 100+1+3 {
				t.Errorf("flooder's queue held up to %d frames, %d snapshots", maxLive, maxSnaps)
			}
			s := e.marker()
			for i, c := range e.watchers {
				m := e.mirrors[i]
				m.readUntil(t, c, s.Seq)
				if len(m.seqs) != 101 {
					t.Errorf("watcher %d got %d events of 101", i, len(m.seqs))
				}
				checkMirror(t, m, s, nil)
			}
		})
	}
}

// TestFloodBoxesUser: a user closed for flooding who comes straight back
// is closed again before she joins (no hello, no snapshot: a reconnect
// loop costs the hub no snapshot), with the wait in the reason; other
// users connect as usual.
func TestFloodBoxesUser(t *testing.T) {
	e := newFloodEnv(t)
	fl := e.dial("bob")
	expectOp(t, fl, "hello")
	for range 10 * floodBurst {
		if fl.WriteRaw([]byte(`{"op":"subscribe","topics":["extensions"]}`)) != nil {
			break
		}
	}
	fl.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := fl.ReadRaw(); err != nil {
			if code := CloseCode(err); code != CloseTooMany {
				t.Fatalf("flooder closed with %d (%v)", code, err)
			}
			break
		}
	}
	again := e.dial("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := again.Next(ctx)
	if err == nil || CloseCode(err) != CloseTooMany || !strings.Contains(err.Error(), "reconnect in") {
		t.Fatalf("bob back at once: %+v, %v; want a 4008 close before hello", m, err)
	}
	other := e.dial("alice")
	expectOp(t, other, "hello")
}

func TestPenaltyDoubles(t *testing.T) {
	var p penalties
	t0 := time.Unix(1e9, 0)
	now := t0
	for i, want := range []time.Duration{2, 4, 8, 16, 32, 64, 120, 120} {
		if got := p.flooded("bob", now); got != want*time.Second {
			t.Fatalf("flood close %d: boxed %v, want %v", i+1, got, want*time.Second)
		}
		if p.left("bob", now) == 0 || p.left("alice", now) != 0 {
			t.Fatalf("flood close %d: bob left %v, alice %v", i+1, p.left("bob", now), p.left("alice", now))
		}
		now = now.Add(want*time.Second + time.Millisecond)
		if p.left("bob", now) != 0 {
			t.Fatalf("flood close %d: still boxed after it ended", i+1)
		}
	}
	// An hour of good behaviour starts it over.
	if got := p.flooded("bob", now.Add(2*time.Hour)); got != 2*time.Second {
		t.Errorf("after an hour: boxed %v", got)
	}
}
