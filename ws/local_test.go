package ws

import (
	"encoding/json"
	"fmt"
	"slices"
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

// newLocalEnv is an env whose hub, of epoch e1, serves a localState.
func newLocalEnv(t *testing.T) (*env, *localState) {
	var ls *localState
	e := newEnvState(t, calls.Config{}, auth.Config{}, Config{Epoch: "e1"}, func(eng *calls.Engine) State {
		ls = newLocalState(eng)
		return ls
	})
	return e, ls
}

// TestLocalStale: a node saying on its own that its state is stale
// sends every client a snapshot, stale and stalled at the feed's seq,
// under an epoch of its own (nobody resumes from it: a resume from it, or
// with the hub's epoch while it says so, gets a snapshot), then, heard
// again, a live snapshot under the hub's epoch from which one resumes.
func TestLocalStale(t *testing.T) {
	e, ls := newLocalEnv(t)
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

// TestUnheardStatusNotLive: while the node says on its own that its
// state is stale, its feed may still move (a consumer restarted and
// catching up stays unheard until it has applied what the stream held a
// check before), and the leader's link coming back live is a pbxStatus
// change in it. That event must not reach the clients then: it would
// tell them the link is live (and, limited to some PBXs, their state not
// stale) while the node says it cannot hear its stream, its snapshots
// and REST stale. The changes of entities still go out (they are the
// stream's, in order); heard again, every client gets a live snapshot.
// Also the pbxStatus of a snapshot's gap (a change the hub had fanned
// out that the snapshot does not hold yet).
func TestUnheardStatusNotLive(t *testing.T) {
	e, ls := newLocalEnv(t)
	e.eng.SetLink(calls.LinkStalled) // the leader silent (a stall marker)
	e.eng.Publish()
	c := e.dial("root")
	expectOp(t, c, "hello")
	if err := c.Subscribe("extensions"); err != nil {
		t.Fatal(err)
	}
	if m := expectOp(t, c, "snapshot"); !m.Stale {
		t.Fatal("first snapshot, the link stalled, not stale")
	}
	ls.set(true)
	if m := expectOp(t, c, "snapshot"); !m.Stale || m.Epoch == "e1" {
		t.Fatalf("snapshot when the node says it is stale: stale %v epoch %q", m.Stale, m.Epoch)
	}
	// The catch-up: the leader's link back, then a change of an extension.
	e.eng.SetLink(calls.LinkLive)
	e.eng.Publish()
	e.apply(devState("201", true))
	for {
		m := expectOp(t, c, "event")
		if m.Type == "pbxStatus" {
			t.Fatalf("while the node is unheard, a pbxStatus event: %s", m.Data)
		}
		if m.Type == "extenUpdate" {
			break
		}
	}
	ls.set(false)
	if m := expectOp(t, c, "snapshot"); m.Stale || m.Epoch != "e1" || !strings.Contains(string(m.PBX), `"live"`) {
		t.Fatalf("heard again: stale %v epoch %q pbx %s", m.Stale, m.Epoch, m.PBX)
	}
}

// behindState serves an Unheard snapshot older than its feed: the hub
// ahead of the stored snapshot (the engine stores it just after
// appending its changes).
type behindState struct {
	*calls.Engine
	snap *calls.Snapshot
}

func (s behindState) Snapshot() *calls.Snapshot { return s.snap }

// TestUnheardGapStatus: a snapshot sent while Unheard is followed by the
// changes the hub fanned out that it does not hold yet, but not by their
// pbxStatus (TestUnheardStatusNotLive).
func TestUnheardGapStatus(t *testing.T) {
	users := testUsers(t)
	eng := calls.New(calls.Config{})
	eng.SetLink(calls.LinkStalled)
	old := eng.Publish()
	eng.SetLink(calls.LinkLive)
	eng.Publish()
	eng.Apply(devState("201", true))
	eng.Publish()
	h, err := NewHub(behindState{eng, old.AsUnheard(1)}, auth.NewService(users, auth.Config{}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	h.last = eng.Feed().LastSeq()
	u, _ := users.Lookup("root")
	c := h.addFake(u, topicExtensions)
	h.sendSnapshot(c, "local")
	var types []string
	for _, f := range c.take() {
		var m Message
		if err := json.Unmarshal(payload(f), &m); err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Op+" "+m.Type)
	}
	if !slices.Contains(types, "event extenUpdate") || slices.Contains(types, "event pbxStatus") {
		t.Fatalf("an Unheard snapshot and its gap: %q, want the extenUpdate and no pbxStatus", types)
	}
}

// BenchmarkUnheardFlip: what one flip of a node's own say costs (heard,
// unheard, heard: LocalChanged twice, each a snapshot to every client),
// with 300 extensions, for N admin clients (no sockets): the bytes
// queued per flip and per client, and the hub's time per client.
func BenchmarkUnheardFlip(b *testing.B) { benchFlip(b, false) }

// BenchmarkUnheardFlipStatus is BenchmarkUnheardFlip for clients taking
// status deltas (unheard.go): a flip is two pbxStatus events per client.
func BenchmarkUnheardFlipStatus(b *testing.B) { benchFlip(b, true) }

func benchFlip(b *testing.B, status bool) {
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
				h.addFake(u, allTopics).statusDeltas = status
			}
			var bytes int64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, on := range []bool{true, false} {
					ls.set(on)
					h.localFlip()
					bytes += drain(h)
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "B/flip")
			b.ReportMetric(float64(bytes)/float64(b.N*n), "B/flip/client")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
		})
	}
}
