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
// (queuepieces.go) are of its published members, and that a member
// whose value did not change kept the very bytes of the Publish before:
// only the members that changed are encoded again. (checkFull, in
// TestMixPublishDerivesWhatChanged, checks the bytes.)
func TestQueuePiecesShared(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	r := rand.New(rand.NewPCG(5, 9))
	prev := map[string]*memberPieces{}
	kept, encoded := 0, 0
	inBatches(e, m.stream(8000), r, func(i, _ int) {
		e.Publish()
		for k, q := range e.queues {
			p, was := q.pieces, prev[k]
			if !maps.Equal(p.m, e.pub.queues[k].Members) {
				t.Fatalf("event %d: queue %s's pieces are not of its published members", i, k)
			}
			if p == was || was == nil {
				continue
			}
			old := map[string][]byte{}
			for _, it := range was.items {
				old[it.key] = it.json
			}
			for _, it := range p.items {
				b, ok := old[it.key]
				switch {
				case ok && was.m[it.key] == p.m[it.key]:
					if &b[0] != &it.json[0] {
						t.Fatalf("event %d: queue %s: member %s unchanged, encoded again", i, k, it.key)
					}
					kept++
				default:
					encoded++
				}
			}
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
// joins or leaves a queue of 40 members: the queue's JSON, its members'
// pieces copied, not the members' map cloned nor their JSON made again
// (19 KB a Publish with the map cloned, 9.5 KB measured).
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
	if bytes > float64(size)+4096 {
		t.Errorf("a Publish allocates %.0f bytes, want at most the queue's JSON (%d) and 4 KB", bytes, size)
	}
}
