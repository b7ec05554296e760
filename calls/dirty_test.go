package calls

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// checkFull re-derives every extension and trunk and compares the result
// with what the last Publish published: the owners Publish skipped
// (dirty.go) must not have had anything to show.
func checkFull(t *testing.T, e *Engine, where string) {
	t.Helper()
	for k, x := range e.exts {
		v, _ := e.extView(x, nil)
		if old, ok := e.pub.exts.cur.Lookup(k); !ok || !extEqual(&old, &v) {
			t.Fatalf("%s: extension %s published %+v, derives %+v", where, k, old.Conversations, v.Conversations)
		}
	}
	for k, tr := range e.trunks {
		// In full, as convsOf does for an extension (trunkView derives
		// what a batch touched: trunkconvs.go).
		convs := e.trunkConvsFull(tr.chans)
		v := Trunk{Name: tr.name, Status: tr.status, Registration: tr.registration, ChanType: tr.chanType, Conversations: ConvMapOf(convs)}
		old, ok := TrunkMap{e.pub.trunk}.Lookup(k)
		if !ok || !trunkEqual(&old, &v) {
			t.Fatalf("%s: trunk %s published %+v, derives %+v", where, k, old.Conversations.Map(), convs)
		}
		// The bytes put together from the pieces are those of the
		// conversations encoded whole.
		x := e.pub.trunk.ents[k]
		want := appendConversations(appendKey(appendTrunkHead(nil, &v), "conversations"), convs, x.at, enc{})
		if want = append(want, '}'); !bytes.Equal(x.json(Full), want) {
			t.Fatalf("%s: trunk %s published\n%s\nencodes\n%s", where, k, x.json(Full), want)
		}
		hid := appendConversations(appendKey(appendTrunkHead(nil, &v), "conversations"), convs, x.at, enc{hide: true, op: e.cfg.Opaque})
		if hid = append(hid, '}'); !bytes.Equal(x.json(NumbersHidden), hid) {
			t.Fatalf("%s: trunk %s published hidden\n%s\nencodes\n%s", where, k, x.json(NumbersHidden), hid)
		}
	}
	checkQueues(t, e, where)
	checkShows(t, e, where)
	checkExtPub(t, e, where)
}

// checkShows: the index of the numbers the published extensions'
// conversations show (extWriter.shows, kept by set) is the one counted
// afresh from them.
func checkShows(t *testing.T, e *Engine, where string) {
	t.Helper()
	want := map[string]map[string]int{}
	for k, x := range e.pub.exts.cur.All() {
		for _, cv := range x.Conversations {
			if n := cv.CounterpartNum; n != "" {
				if want[n] == nil {
					want[n] = map[string]int{}
				}
				want[n][k]++
			}
		}
	}
	if got := e.pub.exts.showCounts(); !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("%s: index of numbers shown %v, counts afresh %v", where, got, want)
	}
}

// checkQueues: every queue as published is its state copied afresh, and
// its bytes, members put together from their pieces (queuepieces.go),
// are those of that copy encoded whole, in both classes.
func checkQueues(t *testing.T, e *Engine, where string) {
	t.Helper()
	for k, q := range e.queues {
		v := Queue{Queue: q.name, Name: q.name, Number: q.number, Members: maps.Clone(q.members.m), WaitingCallers: maps.Clone(q.waiting.m),
			Completed: q.completed, Abandoned: q.abandoned, HoldTime: q.holdTime, TalkTime: q.talkTime}
		old, ok := QueueMap{e.pub.queue}.Lookup(k)
		if !ok || !queueEqual(&old, &v) {
			t.Fatalf("%s: queue %s published %+v, holds %+v", where, k, old, v)
		}
		x := e.pub.queue.ents[k]
		for _, c := range []Class{Full, NumbersHidden} {
			want := appendQueue(nil, &v, x.at, enc{hide: c != Full, op: e.cfg.Opaque})
			if got := x.json(c); !bytes.Equal(got, want) {
				t.Fatalf("%s: queue %s published (class %d)\n%s\nencodes\n%s", where, k, c, got, want)
			}
		}
	}
}

// TestPublishDerivesWhatChanged: after every Publish, re-deriving every
// owner finds exactly what was published, for every recording replayed in
// order and disordered (as TestDisorderedRecordings), in batches of random
// size.
func TestPublishDerivesWhatChanged(t *testing.T) {
	for _, name := range scenarios {
		rec := loadRecording(t, name)
		for seed := range uint64(8) {
			r := rand.New(rand.NewPCG(seed, 11))
			msgs := rec.msgs
			if seed > 0 {
				msgs = mutate(r, rec.msgs)
			}
			var clk StreamClock
			e := New(testConfig(clk.Now))
			batch := 1 + r.IntN(16)
			for i, m := range msgs {
				clk.Observe(m)
				e.Apply(m)
				if i%batch == 0 || i == len(msgs)-1 {
					e.Publish()
					checkFull(t, e, fmt.Sprintf("%s/%d message %d (%s)", name, seed, i, summary(m)))
				}
			}
		}
	}
}

// TestPublishDerivesWhatChangedAtScale: the same check while calls start
// and end among many others.
func TestPublishDerivesWhatChangedAtScale(t *testing.T) {
	e, s := scaleEngine(t, 300, 100)
	for i, m := range s.stream(3000) {
		e.Apply(m)
		if i%7 == 0 {
			e.Publish()
			checkFull(t, e, fmt.Sprintf("message %d (%s)", i, summary(m)))
		}
	}
}
