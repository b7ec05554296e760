package ws

import (
	"encoding/json"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// linkOf is the "pbx" of a pbxStatus event's data.
func linkOf(t *testing.T, data []byte) string {
	t.Helper()
	var st struct{ PBX string }
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("status %s: %v", data, err)
	}
	return st.PBX
}

// subscribeStatus dials user and subscribes to topics asking for status
// deltas; it returns the client and its snapshot.
func subscribeStatus(t *testing.T, e *env, user string, since *uint64, epoch string) (*Client, Message) {
	t.Helper()
	c := e.dial(user)
	expectOp(t, c, "hello")
	if err := c.SubscribeWith(Sub{Topics: []string{"extensions"}, Deltas: []string{"status"}, Since: since, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	return c, next(t, c)
}

// TestUnheardStatusDeltas: a client taking status deltas is told the
// node's own say as a pbxStatus at its seq, taking none: stalled when
// the node cannot hear its stream, then, heard again, the status the
// state says (live), and no snapshot; while unheard, a pbxStatus change
// of the feed (the leader's link back live, in a catch-up) reaches it
// stalled, as the node says it, at the change's seq. A client not asking
// for them gets the snapshots, and no pbxStatus while unheard
// (TestUnheardStatusNotLive).
func TestUnheardStatusDeltas(t *testing.T) {
	e, ls := newLocalEnv(t)
	e.eng.SetLink(calls.LinkStalled) // the leader silent (a stall marker)
	e.apply(devState("201", true))
	c, first := subscribeStatus(t, e, "root", nil, "")
	if first.Op != "snapshot" || !first.Stale || first.Epoch != "e1" {
		t.Fatalf("first: %s stale %v epoch %q", first.Op, first.Stale, first.Epoch)
	}
	plain := e.dial("root")
	expectOp(t, plain, "hello")
	if err := plain.Subscribe("extensions"); err != nil {
		t.Fatal(err)
	}
	expectOp(t, plain, "snapshot")
	m := mirror{colls: map[string]map[string]string{}}
	m.apply(t, first)

	ls.set(true)
	st := next(t, c)
	if st.Op != "event" || st.Type != "pbxStatus" || st.Seq != first.Seq || linkOf(t, st.Data) != "stalled" {
		t.Fatalf("going unheard: %s %s seq %d (want %d) %s", st.Op, st.Type, st.Seq, first.Seq, st.Data)
	}
	m.apply(t, st)
	if !m.stale {
		t.Fatal("the mirror not stale after going unheard")
	}
	if s := expectOp(t, plain, "snapshot"); !s.Stale || s.Epoch == "e1" {
		t.Fatalf("going unheard, without status deltas: stale %v epoch %q", s.Stale, s.Epoch)
	}

	// The catch-up: the leader's link back, then a change of an extension.
	e.eng.SetLink(calls.LinkLive)
	e.eng.Publish()
	statusSeq := e.eng.Feed().LastSeq()
	e.apply(devState("202", true))
	got := next(t, c)
	if got.Type != "pbxStatus" || got.Seq != statusSeq || linkOf(t, got.Data) != "stalled" {
		t.Fatalf("a pbxStatus change while unheard: %s seq %d (want %d) %s, want stalled", got.Type, got.Seq, statusSeq, got.Data)
	}
	m.apply(t, got)
	if got := next(t, c); got.Type != "extenUpdate" {
		t.Fatalf("after the catch-up's status: %s %s", got.Op, got.Type)
	} else {
		m.apply(t, got)
	}
	if got := expectOp(t, plain, "event"); got.Type != "extenUpdate" {
		t.Fatalf("without status deltas, while unheard: %s %s", got.Type, got.Data)
	}

	ls.set(false)
	st = next(t, c)
	if st.Op != "event" || st.Type != "pbxStatus" || st.Seq != e.eng.Feed().LastSeq() || linkOf(t, st.Data) != "live" {
		t.Fatalf("heard again: %s %s seq %d (want %d) %s", st.Op, st.Type, st.Seq, e.eng.Feed().LastSeq(), st.Data)
	}
	m.apply(t, st)
	if m.stale {
		t.Fatal("the mirror stale after hearing again")
	}
	if s := expectOp(t, plain, "snapshot"); s.Stale || s.Epoch != "e1" {
		t.Fatalf("heard again, without status deltas: stale %v epoch %q", s.Stale, s.Epoch)
	}
	// Nothing more: the next message is the pong.
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	expectOp(t, c, "pong")
}

// TestResumedStatus: a resume taking status deltas is "resumed" and at
// once the node's status at since, so that a client told stalled out of
// the feed (by a node that could not hear) learns it when it resumes
// from that seq, here or on another node, though the feed since holds no
// pbxStatus. Without status deltas, no such event.
func TestResumedStatus(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{Epoch: "e1"})
	e.eng.SetLink(calls.LinkLive)
	e.apply(devState("201", true))
	since := e.eng.Feed().LastSeq()
	e.apply(devState("202", true))
	c, m := subscribeStatus(t, e, "root", &since, "e1")
	if m.Op != "resumed" {
		t.Fatalf("%s, want resumed", m.Op)
	}
	st := next(t, c)
	if st.Type != "pbxStatus" || st.Seq != since || linkOf(t, st.Data) != "live" {
		t.Fatalf("after resumed: %s %s seq %d (want %d) %s", st.Op, st.Type, st.Seq, since, st.Data)
	}
	if ev := next(t, c); ev.Type != "extenUpdate" || ev.Seq <= since {
		t.Fatalf("then: %s seq %d", ev.Type, ev.Seq)
	}
	r := e.dial("root")
	expectOp(t, r, "hello")
	if err := r.Resume("e1", since, "extensions"); err != nil {
		t.Fatal(err)
	}
	expectOp(t, r, "resumed")
	if ev := next(t, r); ev.Type != "extenUpdate" {
		t.Fatalf("without status deltas, after resumed: %s %s", ev.Type, ev.Data)
	}
}

// TestUnheardSnapshotThenHeard: a client taking status deltas that
// subscribed while the node could not hear got an unheard snapshot,
// under the unheard epoch: heard again, it gets a live snapshot under
// the hub's epoch (from which it may resume), not a status delta.
func TestUnheardSnapshotThenHeard(t *testing.T) {
	e, ls := newLocalEnv(t)
	e.eng.SetLink(calls.LinkLive)
	e.apply(devState("201", true))
	ls.set(true)
	c, first := subscribeStatus(t, e, "root", nil, "")
	if first.Op != "snapshot" || !first.Stale || first.Epoch == "e1" {
		t.Fatalf("subscribed while unheard: %s stale %v epoch %q", first.Op, first.Stale, first.Epoch)
	}
	ls.set(false)
	if s := next(t, c); s.Op != "snapshot" || s.Stale || s.Epoch != "e1" {
		t.Fatalf("heard again: %s %s stale %v epoch %q", s.Op, s.Type, s.Stale, s.Epoch)
	}
}
