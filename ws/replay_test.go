package ws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// queuedFrame is what a client's queue held of one frame: its bytes as
// written and what the queue keeps by.
type queuedFrame struct {
	b    []byte
	seq  uint64
	ent  uint32
	kind frameKind
}

func takeBytes(c *conn) []queuedFrame {
	var out []queuedFrame
	for _, f := range c.take() {
		b := append([]byte(nil), f.b...)
		for _, p := range f.more {
			b = append(b, p...)
		}
		out = append(out, queuedFrame{b, f.seq, f.ent, f.kind})
	}
	return out
}

// TestReplayShared: clients resuming in one pass (replay.go) get byte
// for byte what each got from a pass of its own, a prep per client as
// before: every user of testUsers and two limited to a PBX, every topic
// set, trunks whole or as deltas, subscribed to one PBX or all, from
// three points of a replay holding calls, queues, parkings, a trunk,
// conferences and link changes of two PBXs, the later points first (the
// pass then reads the feed again from further back).
func TestReplayShared(t *testing.T) {
	for _, rec := range []string{"inbound_trunk_did", "queue_answered", "park_retrieve", "attended_transfer_atxfer"} {
		t.Run(rec, func(t *testing.T) { testReplayShared(t, rec) })
	}
}

func testReplayShared(t *testing.T, rec string) {
	def := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
	site2 := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
	for _, e := range []*calls.Engine{def, site2} {
		e.SetLink(calls.LinkLive)
		e.Publish()
	}
	multi := calls.NewMulti(0, []string{"", "site2"}, []calls.Source{def, site2})
	hash := testHash()
	all := testUsers(t).All()
	var list []auth.User
	for _, u := range all {
		list = append(list, *u)
	}
	list = append(list,
		auth.User{Username: "rita", PasswordHash: hash, Role: auth.RoleAdmin, PBXs: []string{"site2"}},
		auth.User{Username: "dora", PasswordHash: hash, Role: auth.RoleUser, Endpoints: []string{"201"}, PBXs: []string{"default"}})
	users, err := auth.NewUsers(list)
	if err != nil {
		t.Fatal(err)
	}
	state := &lagState{State: multi}
	h, err := NewHub(state, auth.NewService(users, auth.Config{}), Config{MaxPending: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	msgs := loadRecording(t, rec)
	var points []uint64
	for i, m := range msgs {
		def.Apply(m)
		def.Publish()
		multi.Sync(0)
		if i%2 == 0 {
			site2.Apply(m)
			site2.Publish()
			multi.Sync(1)
		}
		if i == len(msgs)/3 {
			def.SetLink(calls.LinkStalled)
			def.Publish()
			multi.Sync(0)
		}
		if i == len(msgs)/2 {
			def.SetLink(calls.LinkLive)
			def.Publish()
			multi.Sync(0)
		}
		if i == len(msgs)/4 || i == len(msgs)/2 || i == 3*len(msgs)/4 {
			points = append(points, multi.Feed().LastSeq())
			if state.snap == nil {
				state.snap = multi.Snapshot()
			}
		}
	}
	h.last = multi.Feed().LastSeq()
	lagged := state.snap
	state.snap = nil
	type sub struct {
		c   *conn
		req subReq
	}
	var subs []sub
	for i := len(points) - 1; i >= 0; i-- {
		for _, u := range users.All() {
			for _, topics := range []uint8{allTopics, topicMe, topicTrunks | topicQueues | topicParkings, topicExtensions | topicPresence} {
				for _, pbxs := range [][]string{nil, {"site2"}, {"default", "site2"}} {
					for _, deltas := range []uint8{0, deltaTrunks, deltaQueues, deltaAll} {
						c := h.addFake(u, 0)
						c.subscribed = false
						subs = append(subs, sub{c, subReq{topics: topics, pbxs: pbxs, deltas: deltas, resume: true, since: points[i]}})
					}
				}
			}
		}
	}
	// Each in a pass of its own: a prep per client, as before passes.
	want := make([][]queuedFrame, len(subs))
	for i, s := range subs {
		h.subscribe(s.c, s.req)
		h.endPass()
		want[i] = takeBytes(s.c)
	}
	// All in one.
	for _, s := range subs {
		h.subscribe(s.c, s.req)
	}
	if !h.replay.open || h.replay.since != points[0] {
		t.Fatalf("the resumes made no pass from %d", points[0])
	}
	h.endPass()
	events := 0
	types := map[string]int{}
	for i, s := range subs {
		got := takeBytes(s.c)
		name := fmt.Sprintf("%s %+v", s.c.user.Username, s.req)
		if len(got) != len(want[i]) {
			t.Fatalf("%s: %d frames in one pass, %d alone", name, len(got), len(want[i]))
		}
		for j := range got {
			g, w := got[j], want[i][j]
			if !bytes.Equal(g.b, w.b) || g.seq != w.seq || g.ent != w.ent || g.kind != w.kind {
				t.Fatalf("%s, frame %d:\n got %q (seq %d ent %d kind %d)\nwant %q (seq %d ent %d kind %d)", name, j, g.b, g.seq, g.ent, g.kind, w.b, w.seq, w.ent, w.kind)
			}
		}
		if got[0].kind != frameResumed {
			t.Fatalf("%s: not resumed", name)
		}
		events += len(got) - 1
		for _, g := range got[1:] {
			var m Message
			if err := json.Unmarshal(g.b[headerLenOf(g.b):], &m); err == nil {
				types[m.Type]++
			}
		}
	}

	if events < len(subs) {
		t.Fatalf("%d events in %d replays", events, len(subs))
	}

	// Snapshots behind the hub (the engine stores its snapshot after
	// appending its changes), their gaps replayed: the same.
	state.snap = lagged
	for i, s := range subs {
		s.req.resume = false
		h.subscribe(s.c, s.req)
		h.endPass()
		want[i] = takeBytes(s.c)
	}
	for _, s := range subs {
		s.req.resume = false
		h.subscribe(s.c, s.req)
	}
	if !h.replay.open || h.replay.since != lagged.Seq {
		t.Fatalf("the snapshots' gaps made no pass from %d", lagged.Seq)
	}
	h.endPass()
	gaps := 0
	for i, s := range subs {
		got := takeBytes(s.c)
		gaps += len(got) - 1
		if len(got) != len(want[i]) || got[0].kind != frameSnapshot {
			t.Fatalf("%s %+v: %d frames in one pass, %d alone", s.c.user.Username, s.req, len(got), len(want[i]))
		}
		for j := range got {
			if g, w := got[j], want[i][j]; !bytes.Equal(g.b, w.b) || g.seq != w.seq || g.ent != w.ent || g.kind != w.kind {
				t.Fatalf("%s %+v, frame %d:\n got %q\nwant %q", s.c.user.Username, s.req, j, g.b, w.b)
			}
		}
	}
	if gaps < len(subs) {
		t.Fatalf("%d events in %d snapshots' gaps", gaps, len(subs))
	}
}

// lagState serves snap, when set, as its snapshot: one older than its
// feed.
type lagState struct {
	State
	snap *calls.Snapshot
}

func (s *lagState) Snapshot() *calls.Snapshot {
	if s.snap != nil {
		return s.snap
	}
	return s.State.Snapshot()
}

// TestReplayPassEnds: a pass's frames are not replayed once the hub has
// fanned out more (h.last moved) or the state's Unheard changed, nor
// after endPass.
func TestReplayPassEnds(t *testing.T) {
	eng := calls.New(calls.Config{})
	users := testUsers(t)
	ls := newLocalState(eng)
	h, err := NewHub(ls, auth.NewService(users, auth.Config{}), Config{MaxPending: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	since := eng.Feed().LastSeq()
	eng.Apply(devState("201", true))
	eng.Publish()
	h.last = eng.Feed().LastSeq()
	heard := eng.Snapshot()
	cs, _ := h.replayed(since, heard)
	f := h.replayPrep(&cs[0], heard).full
	if h.replayPrep(&cs[0], heard).full != f {
		t.Fatal("a change prepared twice in a pass")
	}
	eng.Apply(devState("202", true))
	eng.Publish()
	h.last = eng.Feed().LastSeq()
	heard = eng.Snapshot()
	if cs2, _ := h.replayed(since, heard); len(cs2) != 2 || h.replayPrep(&cs2[0], heard).full == f {
		t.Fatal("the pass outlived a fan-out")
	}
	cs, _ = h.replayed(since, heard)
	f = h.replayPrep(&cs[0], heard).full
	unheard := heard.AsUnheard(1)
	if cs2, _ := h.replayed(since, unheard); h.replayPrep(&cs2[0], unheard).full == f || !h.replayPrep(&cs2[0], unheard).unheard {
		t.Fatal("the pass outlived a change of Unheard")
	}
	h.endPass()
	if h.replay.open || h.replay.cs != nil {
		t.Fatal("endPass kept the pass")
	}
}
