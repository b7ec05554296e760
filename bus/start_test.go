package bus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestStartingEdgeNotLive: an edge started while its leader goes on
// publishing (calls placed and hung up) replays the stream from its
// start, 8 ms a message, so that the replay spans several beats. From
// its start on, sampled every 2 ms, whenever it says live (its snapshot
// not stale, or Ready) it has applied what the leader had published a
// beat period (and 150 ms of slack) before: never a state behind the
// leader's last beat as live. Before a starting node waited for its
// first beat, it was live from the replay's first live link on, with
// calls that had ended long since.
func TestStartingEdgeNotLive(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	waitFor(t, "bridge-a live", 20*time.Second, func() bool { return live(a.served) })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var phones []*pbxsim.Phone
	for _, x := range []string{"201", "202", "203"} {
		phones = append(phones, startPhone(t, sim, x))
	}
	// The leader publishes all along: a backlog first, then while the
	// edge starts.
	var rounds atomic.Int64
	cctx, stopCalls := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Go(func() {
		for cctx.Err() == nil {
			var hangups []func()
			for i, ph := range phones {
				if c, err := ph.Call(cctx, fmt.Sprintf("60%d", i+1)); err == nil {
					hangups = append(hangups, func() { c.Hangup(ctx) })
				}
			}
			time.Sleep(150 * time.Millisecond)
			for _, h := range hangups {
				h()
			}
			rounds.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	})
	defer func() { stopCalls(); cwg.Wait() }()
	waitFor(t, "a backlog of 8 rounds of calls", 30*time.Second, func() bool { return rounds.Load() >= 8 })

	type sample struct {
		at           time.Time
		pub, applied uint64
		live, ready  bool
		unheard      bool
		staleLink    bool
	}
	var samples []sample
	pubSeq := func() uint64 {
		a.n.pubMu.Lock()
		defer a.n.pubMu.Unlock()
		return a.n.pubSeq
	}
	// What the leader had published a slack before the edge's start:
	// the bound of the first samples.
	slack := beatEvery(ttl) + 150*time.Millisecond
	samples = append(samples, sample{at: time.Now(), pub: pubSeq()})
	time.Sleep(slack)
	var replaying atomic.Bool
	replaying.Store(true)
	e := startNodeWith(t, srv.URL(), "edge-1", "", ttl, func(c *Config) {
		c.beforeApply = func(uint64) {
			if replaying.Load() {
				time.Sleep(8 * time.Millisecond)
			}
		}
	})
	st := e.n.State()
	start := time.Now()
	for time.Since(start) < 4*time.Second {
		pub := pubSeq()
		applied := e.n.applied.Load()
		s := st.Snapshot()
		samples = append(samples, sample{at: time.Now(), pub: pub, applied: applied,
			live: !s.Stale, ready: e.n.Ready(), unheard: s.Unheard})
		time.Sleep(2 * time.Millisecond)
	}
	replaying.Store(false)
	waitFor(t, "the edge live, as the bridge", 30*time.Second, func() bool {
		return !st.Snapshot().Stale && e.n.applied.Load() >= pubSeq()
	})

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
	var wrong, liveSamples int
	var firstLive time.Duration
	for _, s := range samples[1:] {
		if !s.live && !s.ready {
			continue
		}
		if liveSamples++; liveSamples == 1 {
			firstLive = s.at.Sub(start)
		}
		if want := pubAt(s.at.Add(-slack)); s.applied < want {
			if wrong++; wrong <= 5 {
				t.Errorf("%v after its start the edge says live %v, ready %v with seq %d applied, while the leader had published %d %v before",
					s.at.Sub(start).Round(time.Millisecond), s.live, s.ready, s.applied, want, slack)
			}
		}
	}
	last := samples[len(samples)-1]
	t.Logf("%d samples over %v; first live %v after start; %d samples live or ready, %d of them behind; at the end applied %d of %d",
		len(samples), last.at.Sub(start).Round(time.Millisecond), firstLive.Round(time.Millisecond), liveSamples, wrong, last.applied, last.pub)
	if samples[1].pub < 30 {
		t.Errorf("a backlog of %d messages only: the replay spans too few beats", samples[1].pub)
	}
	if liveSamples == 0 {
		t.Error("the edge was never live in 4 s: the test proves nothing")
	}
}
