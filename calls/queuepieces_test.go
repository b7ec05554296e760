package calls

import (
	"maps"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestQueuePiecesShared runs the call centre's mix in batches of random
// size and checks after every Publish that each queue's members' pieces
// (queuepieces.go) are of its published members, are the bytes
// appendMembers writes of them, and were made encoding only the members
// that changed since the pieces before: the others' bytes are copied.
func TestQueuePiecesShared(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	r := rand.New(rand.NewPCG(5, 9))
	prev := map[string]*memberPieces{}
	kept, encoded := 0, 0
	inBatches(e, m.stream(8000), r, func(i, _ int) {
		e.Publish()
		for k, q := range e.queues {
			p, was := q.pieces, prev[k]
			if !maps.Equal(p.m, e.pub.queue.ents[k].v.Members) {
				t.Fatalf("event %d: queue %s's pieces are not of its published members", i, k)
			}
			if p == was || was == nil {
				continue
			}
			if got, want := p.appendJSON(nil), appendMembers(nil, p.m); string(got) != string(want) {
				t.Fatalf("event %d: queue %s's pieces are\n%s\nwant\n%s", i, k, got, want)
			}
			changed := 0
			for mk, mb := range p.m {
				if old, ok := was.m[mk]; !ok || *old != *mb {
					changed++
				}
			}
			if p.encoded > changed {
				t.Fatalf("event %d: queue %s: %d members changed, %d encoded", i, k, changed, p.encoded)
			}
			kept += len(p.m) - p.encoded
			encoded += p.encoded
		}
		for k, q := range e.queues {
			prev[k] = q.pieces
		}
	})
	t.Logf("%d member pieces kept, %d encoded", kept, encoded)
	if encoded == 0 || kept < 4*encoded {
		t.Errorf("%d member pieces kept and %d encoded, want some encoded and four times as many kept", kept, encoded)
	}
}

// TestQueuePublishAllocs bounds what a Publish allocates when a caller
// joins or leaves a queue of 40 members: what changed in the queue
// (queuedelta.go) and its entity, the queue's JSON not made until a reader
// wants it whole, the members' map not cloned, their JSON not made again:
// cloning the map or making the queue's JSON at each change breaks the
// bound.
func TestQueuePublishAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	now := time.Unix(1796028439, 0)
	e := New(Config{Now: func() time.Time { return now }})
	for i := range 40 {
		x := strconv.Itoa(2000 + i)
		e.Apply(ev("QueueMember", "Queue", "support", "Name", "User "+x, "Location", "PJSIP/"+x, "StateInterface", "PJSIP/"+x,
			"Membership", "static", "CallsTaken", "3", "LastCall", "1796028000", "Paused", "0", "PausedReason", ""))
	}
	e.Publish()
	size := len(e.Snapshot().QueueJSON("support"))
	var msgs []ami.Message // made before: the events' own bytes are not the engine's
	for i := range 220 {
		ch := "PJSIP/trunk-" + strconv.Itoa(i/2)
		if i%2 == 0 {
			msgs = append(msgs, ev("QueueEntry", "Queue", "support", "Channel", ch, "Uniqueid", "1.1", "CallerIDNum", "0612345678",
				"CallerIDName", "Ann", "Position", "1", "Wait", "0"))
		} else {
			msgs = append(msgs, ev("QueueCallerLeave", "Queue", "support", "Channel", ch))
		}
	}
	i := 0
	step := func() {
		e.Apply(msgs[i])
		e.Publish()
		i++
	}
	for range 10 {
		step()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 200
	for range n {
		step()
	}
	runtime.ReadMemStats(&after)
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("%.0f bytes a Publish, the queue's JSON %d", bytes, size)
	if bytes > 3072 || bytes > float64(size)/2 {
		t.Errorf("a Publish allocates %.0f bytes, want at most 3 KB and half the queue's JSON (%d)", bytes, size)
	}
}

// TestMemberPiecesApply changes a queue's members at random between views
// (members set, changed back, added, removed; more than cowKeysMax in a
// round at times) and checks that the pieces each view makes are the
// bytes appendMembers writes, made encoding no member that did not
// change, that the queue's entity is the JSON appendQueue writes
// without pieces, and that the next view's pieces leave these as they
// were (a snapshot holds them).
func TestMemberPiecesApply(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	q := &queueState{name: "support", members: newCowMap[QueueMember](), waiting: newCowMap[QueueCaller]()}
	var was map[string]*QueueMember
	var before *memberPieces
	for round := range 3000 {
		n := 1 + r.IntN(4)
		if r.IntN(10) == 0 {
			n = cowKeysMax + r.IntN(8)
		}
		for range n {
			k := strconv.Itoa(200 + r.IntN(50))
			switch x := r.IntN(10); {
			case x == 0:
				q.members.del(k)
			case x == 1 && was != nil: // back to what the last view had
				if mb, ok := was[k]; ok {
					q.members.set(k, *mb)
				} else {
					q.members.del(k)
				}
			default:
				q.members.set(k, QueueMember{Queue: q.name, Member: k, Name: "Agent \"" + k + "\"", Type: "static", LoggedIn: true, CallsTaken: r.IntN(3)})
			}
		}
		if r.IntN(5) == 0 {
			q.waiting.set("PJSIP/trunk-1", QueueCaller{Channel: "PJSIP/trunk-1", Num: "0612345678", Position: round})
		}
		v, _, _ := q.view()
		p := v.pieces
		if before != nil && string(before.appendJSON(nil)) != string(appendMembers(nil, was)) {
			t.Fatalf("round %d: this view's pieces wrote over the pieces before: %s", round, before.appendJSON(nil))
		}
		if got, want := p.appendJSON(nil), appendMembers(nil, v.Members); string(got) != string(want) {
			t.Fatalf("round %d: pieces\n%s\nwant\n%s", round, got, want)
		}
		changed := 0
		for k, mb := range v.Members {
			if old, ok := was[k]; !ok || *old != *mb {
				changed++
			}
		}
		if p != before && was != nil && p.encoded > changed {
			t.Fatalf("round %d: %d members changed, %d encoded", round, changed, p.encoded)
		}
		bare := v
		bare.pieces = nil
		want := appendQueue(nil, &bare, 0, enc{})
		x := newLazyEnt(v, 0, nil, appendQueue)
		if got := x.json(Full); string(got) != string(want) {
			t.Fatalf("round %d: queue\n%s\nwant\n%s", round, got, want)
		}
		was, before = v.Members, p
	}
}

// TestQueueViewNotPublished: members changed and changed back within one
// batch leave the queue as published, so Publish skips it; when more than
// cowKeysMax changed, view made its pieces again, of members equal to the
// published ones, and another queue's pieces are made after them. A
// member changed in the next batch then shows in the queue's JSON with
// the others as they are.
func TestQueueViewNotPublished(t *testing.T) {
	now := time.Unix(1796028439, 0)
	e := New(Config{Now: func() time.Time { return now }})
	member := func(queue, x, taken string) ami.Message {
		return ev("QueueMember", "Queue", queue, "Name", "User "+x, "Location", "PJSIP/"+x, "StateInterface", "PJSIP/"+x,
			"Membership", "static", "CallsTaken", taken, "LastCall", "1796028000", "Paused", "0", "PausedReason", "")
	}
	const n = cowKeysMax + 2
	for _, q := range []string{"a", "b"} {
		for i := range n {
			e.Apply(member(q, strconv.Itoa(201+i), "3"))
		}
	}
	e.Publish()
	for i := range n {
		e.Apply(member("a", strconv.Itoa(201+i), "4"))
		e.Apply(member("a", strconv.Itoa(201+i), "3")) // back: queue a is as published
	}
	e.Apply(member("b", "202", "9")) // b's pieces are made after a's view
	e.Publish()
	e.Apply(member("a", "203", "7"))
	s := e.Publish()
	for _, k := range []string{"a", "b"} {
		q := s.Queues.Get(k)
		q.pieces = nil
		if got, want := s.QueueJSON(k), appendQueue(nil, &q, 0, enc{}); string(got) != string(want) {
			t.Errorf("queue %s is\n%s\nwant\n%s", k, got, want)
		}
	}
}
