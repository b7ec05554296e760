package ws

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// localState is an engine whose node may say on its own that its state
// is stale (package bus's State, without NATS).
type localState struct {
	*calls.Engine
	on   atomic.Bool
	wake atomic.Pointer[chan struct{}] // closed and replaced by set
}

func newLocalState(eng *calls.Engine) *localState {
	l := &localState{Engine: eng}
	c := make(chan struct{})
	l.wake.Store(&c)
	return l
}

func (l *localState) Snapshot() *calls.Snapshot {
	s := l.Engine.Snapshot()
	if l.on.Load() {
		return s.AsUnheard(1)
	}
	return s
}

func (l *localState) LocalChanged() <-chan struct{} { return *l.wake.Load() }

func (l *localState) set(on bool) {
	l.on.Store(on)
	c := make(chan struct{})
	close(*l.wake.Swap(&c))
}

// TestLocalStale: a node saying on its own that its state is stale
// sends every client a snapshot, stale and stalled at the feed's seq,
// under an epoch of its own (nobody resumes from it: a resume from it, or
// with the hub's epoch while it says so, gets a snapshot), then, heard
// again, a live snapshot under the hub's epoch from which one resumes.
func TestLocalStale(t *testing.T) {
	var ls *localState
	e := newEnvState(t, calls.Config{}, auth.Config{}, Config{Epoch: "e1"}, func(eng *calls.Engine) State {
		ls = newLocalState(eng)
		return ls
	})
	e.eng.SetLink(calls.LinkLive)
	e.apply(devState("201", true))
	c := e.dial("root")
	expectOp(t, c, "hello")
	if err := c.Subscribe("extensions"); err != nil {
		t.Fatal(err)
	}
	first := expectOp(t, c, "snapshot")
	if first.Stale || first.Epoch != "e1" {
		t.Fatalf("first snapshot: stale %v epoch %q", first.Stale, first.Epoch)
	}

	ls.set(true)
	m := expectOp(t, c, "snapshot")
	if !m.Stale || m.Seq != first.Seq || m.Epoch == "e1" || !strings.Contains(string(m.PBX), `"stalled"`) {
		t.Fatalf("snapshot when the node says it is stale: stale %v seq %d (want %d) epoch %q pbx %s", m.Stale, m.Seq, first.Seq, m.Epoch, m.PBX)
	}
	// A resume while it says so, with the hub's epoch: a snapshot.
	r := e.dial("root")
	expectOp(t, r, "hello")
	if err := r.Resume("e1", first.Seq, "extensions"); err != nil {
		t.Fatal(err)
	}
	if m := expectOp(t, r, "snapshot"); !m.Stale {
		t.Fatal("a resume on a node saying its state is stale got a live snapshot")
	}

	ls.set(false)
	live := expectOp(t, c, "snapshot")
	if live.Stale || live.Epoch != "e1" || strings.Contains(string(live.PBX), "stalled") {
		t.Fatalf("heard again: stale %v epoch %q pbx %s", live.Stale, live.Epoch, live.PBX)
	}
	// From the unheard snapshot's epoch: a snapshot; from the hub's: resumed.
	for epoch, want := range map[string]string{m.Epoch: "snapshot", "e1": "resumed"} {
		r := e.dial("root")
		expectOp(t, r, "hello")
		if err := r.Resume(epoch, first.Seq, "extensions"); err != nil {
			t.Fatal(err)
		}
		expectOp(t, r, want)
	}
}

// BenchmarkUnheardFlip: what one flip of a node's own say costs (heard,
// unheard, heard: LocalChanged twice, each a snapshot to every client),
// with 300 extensions, for N admin clients (no sockets): the bytes
// queued per flip and per client, and the hub's time per client.
func BenchmarkUnheardFlip(b *testing.B) {
	users := testUsers(b)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
			eng.SetLink(calls.LinkLive)
			for i := range 300 {
				eng.Apply(devState(strconv.Itoa(2000+i), i%3 == 0))
			}
			eng.Publish()
			ls := newLocalState(eng)
			h, err := NewHub(ls, auth.NewService(users, auth.Config{}), Config{MaxPending: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			h.last = eng.Feed().LastSeq()
			u, _ := users.Lookup("root")
			for range n {
				h.addFake(u, allTopics)
			}
			var bytes int
			drain := func() {
				for _, c := range h.clients {
					for _, f := range c.take() {
						bytes += len(f.b)
						for _, p := range f.more {
							bytes += len(p)
						}
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, on := range []bool{true, false} {
					ls.set(on)
					h.resyncAll("local")
					drain()
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "B/flip")
			b.ReportMetric(float64(bytes)/float64(b.N*n), "B/flip/client")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
		})
	}
}
