package bus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestLeaderSilentStale: the leader is cut off abruptly (its NATS
// connection closed, as a SIGKILL would) just after it renewed its
// lease, with a call up. The edge must say its state is stale within the
// heartbeat's bound (beatLate), on its own timer: no stream message
// comes in between (the first stall marker cannot come before half the
// lease TTL after the renewal). Then a standby takes over and the edge
// is live again only once it applied the new leader's messages.
// Before the heartbeat, the edge was live until the marker, 1 to 1.5
// TTL/2 after the renewal.
func TestLeaderSilentStale(t *testing.T) {
	const ttl = 2 * time.Second
	cluster, sim, a, e := startLeaderEdge(t, ttl)
	st := e.n.State()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := callShown(ctx, t, sim, e)
	defer call.Hangup(ctx)
	waitFor(t, "the edge live with the call", 10*time.Second, func() bool { s := st.Snapshot(); return !s.Stale && same(a.served, e.served) })

	renewed := watchRenewal(ctx, t, natstest.URLs(cluster))
	select {
	case <-renewed:
	case <-ctx.Done():
		t.Fatal("no lease renewal seen")
	}
	seq := st.Snapshot().Seq
	killed := time.Now()
	a.kill()
	var staleAt time.Duration
	waitForEvery(t, "the edge stale", 10*time.Second, time.Millisecond, func() bool {
		s := st.Snapshot()
		if !s.Stale {
			return false
		}
		staleAt = time.Since(killed)
		if s.Seq != seq || !s.Unheard {
			t.Errorf("the edge went stale at seq %d (the kill's %d), unheard %v: by a stream message, not on its own timer", s.Seq, seq, s.Unheard)
		}
		return true
	})
	// The bound, with a beat period of slack for the timer on a loaded
	// machine: still before any marker could come.
	bound := beatLate(ttl) + 2*beatEvery(ttl)
	t.Logf("the edge stale %v after the leader was cut off (bound %v; the first stall marker no sooner than %v)",
		staleAt.Round(time.Millisecond), bound, ttl/2)
	if staleAt > bound {
		t.Errorf("the edge was stale %v after the leader was cut off, want within %v", staleAt.Round(time.Millisecond), bound)
	}
	if e.n.Ready() {
		t.Error("the edge is ready with its leader silent")
	}

	// A standby takes over: live again only with its messages applied.
	b := startNode(t, natstest.URLs(cluster), "bridge-b", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-b to lead", 20*time.Second, b.n.Leading)
	var liveAt uint64
	waitForEvery(t, "the edge live again", 20*time.Second, time.Millisecond, func() bool {
		a := e.n.applied.Load()
		if st.Snapshot().Stale {
			return false
		}
		liveAt = a
		return true
	})
	if liveAt <= b.n.pubTerm {
		t.Errorf("the edge live again at applied seq %d, before bridge-b's lead record (it led at %d)", liveAt, b.n.pubTerm)
	}
	waitFor(t, "the edge ready, as bridge-b", 10*time.Second, func() bool { return e.n.Ready() && same(b.served, e.served) })
}

// TestBehindNotLive: an edge that applies each message 150 ms late falls
// behind its leader, which goes on publishing (calls placed and hung
// up): its consumer delivers all the while, so its own checks (unheard.go)
// find it catching up, not deaf. The leader's heartbeat says how far it
// published: the edge must say its state is stale once it is behind a
// beat's seq for beatLate, and live only once it applied the seq of the
// last beat it heard. Sampled every 5 ms: whenever the edge says live,
// it has applied what the leader had published a beat and beatLate
// (and 300 ms of slack) before. Then, no longer slowed, it is live and
// the same as the leader.
func TestBehindNotLive(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	var slow atomic.Bool
	e := startNodeWith(t, srv.URL(), "edge-1", "", ttl, func(c *Config) {
		c.beforeApply = func(uint64) {
			if slow.Load() {
				time.Sleep(150 * time.Millisecond)
			}
		}
	})
	st := e.n.State()
	waitFor(t, "the edge live, as the bridge", 20*time.Second, func() bool { return !st.Snapshot().Stale && same(a.served, e.served) })

	type sample struct {
		at             time.Time
		pub, applied   uint64
		live, unheard  bool
		shownSeq, base uint64
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	sctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for sctx.Err() == nil {
			a.n.pubMu.Lock()
			pub := a.n.pubSeq
			a.n.pubMu.Unlock()
			applied := e.n.applied.Load()
			s := st.Snapshot()
			mu.Lock()
			samples = append(samples, sample{at: time.Now(), pub: pub, applied: applied, live: !s.Stale, unheard: s.Unheard})
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})

	slow.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var phones []*pbxsim.Phone
	for _, x := range []string{"201", "202", "203"} {
		phones = append(phones, startPhone(t, sim, x))
	}
	for round := range 4 {
		var calls []func()
		for i, ph := range phones {
			c, err := ph.Call(ctx, fmt.Sprintf("60%d", i+1))
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, func() { c.Hangup(ctx) })
		}
		time.Sleep(400 * time.Millisecond)
		for _, h := range calls {
			h()
		}
		t.Logf("round %d: the leader published %d messages, the edge applied seq %d", round, a.n.Stats().Published, e.n.applied.Load())
		time.Sleep(300 * time.Millisecond)
	}
	slow.Store(false)
	waitFor(t, "the edge live, as the bridge, once no longer slowed", 30*time.Second, func() bool { return !st.Snapshot().Stale && same(a.served, e.served) })
	stop()
	wg.Wait()

	// pubAt is what the leader had published at t.
	pubAt := func(t time.Time) uint64 {
		var p uint64
		for _, s := range samples {
			if s.at.After(t) {
				break
			}
			p = s.pub
		}
		return p
	}
	slack := beatEvery(ttl) + beatLate(ttl) + 300*time.Millisecond
	var behindMost uint64
	var staleSpells, wrong int
	for i, s := range samples {
		behindMost = max(behindMost, s.pub-min(s.pub, s.applied))
		if i > 0 && !s.live && samples[i-1].live {
			staleSpells++
		}
		if s.live && s.applied < pubAt(s.at.Add(-slack)) {
			if wrong++; wrong <= 5 {
				t.Errorf("live at %s with seq %d applied, while the leader had published %d %v before",
					s.at.Format("15:04:05.000"), s.applied, pubAt(s.at.Add(-slack)), slack)
			}
		}
	}
	t.Logf("%d samples; the edge at most %d messages behind; %d stale spells; %d samples live while behind", len(samples), behindMost, staleSpells, wrong)
	if behindMost < 5 || staleSpells == 0 {
		t.Errorf("the edge was at most %d messages behind and stale %d times: the test did not slow it down enough", behindMost, staleSpells)
	}
}

// watchRenewal sends on the channel it returns when the lease of pbx1
// is next rewritten (a renewal), read every 5 ms by a client of its own.
func watchRenewal(ctx context.Context, t *testing.T, url string) <-chan struct{} {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan struct{}, 1)
	go func() {
		var rev uint64
		for ctx.Err() == nil {
			if e, err := kv.Get(ctx, "pbx1"); err == nil {
				if rev != 0 && e.Revision() != rev {
					out <- struct{}{}
					return
				}
				rev = e.Revision()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return out
}

// waitForEvery is waitFor, looking every d.
func waitForEvery(t *testing.T, what string, limit, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}
