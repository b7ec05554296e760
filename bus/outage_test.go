package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestOutageLongerThanRetries: a 3-server cluster's NATS servers are
// all killed while a call is up, and the call hangs up then; one comes
// back at once, alone, and the other two 22 s later. The edge reconnects
// to the lone one, where the stream has no JetStream leader, so no
// consumer can be made for 22 s (before, consume gave up after 15 s and
// the edge's Run returned: the process stopped; the bridge's too). The
// edge stays up, says stale all along and is not ready; the bridge,
// whose lease cannot be renewed, steps down when its grant runs out
// (fence.go) and nothing else stops it. Once the cluster is whole a
// fresh bridge-a (as cmd/ctibridge stands one by) takes the lead, and
// the edge hears its stream again, at that bridge's seq and state,
// without the call that hung up meanwhile (the new link's resync).
func TestOutageLongerThanRetries(t *testing.T) {
	cluster, sim, a, e := startLeaderEdge(t, 2*time.Second)
	st := e.n.State()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	call, err := startPhone(t, sim, "201").Call(ctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "201's call on the edge", 10*time.Second, func() bool { return showsCall(st.Snapshot(), "201", "601") })

	for _, s := range cluster {
		s.Kill()
	}
	killed := time.Now()
	call.Hangup(ctx)
	// A lone server of a cluster is not healthy: relaunched, not waited for.
	if err := cluster[0].Relaunch(); err != nil {
		t.Fatal(err)
	}
	// The disconnect is said at once: a moment for the callback.
	time.Sleep(500 * time.Millisecond)
	for time.Since(killed) < 22*time.Second {
		if e.stopped() || a.stopped() && !errors.Is(a.err, ErrLeaseExpired) {
			t.Fatalf("%v into the outage: the edge stopped %v (%v), the bridge %v (%v)", time.Since(killed).Round(time.Millisecond), e.stopped(), e.err, a.stopped(), a.err)
		}
		if s := st.Snapshot(); !s.Stale || !s.Unheard || e.n.Ready() {
			t.Fatalf("%v into the outage the edge says stale %v, unheard %v, ready %v", time.Since(killed).Round(time.Millisecond), s.Stale, s.Unheard, e.n.Ready())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := natstest.Rejoin(cluster, cluster[1:]); err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster whole again %v after the kill; bridge-a stepped down %v after it", time.Since(killed).Round(time.Millisecond),
		time.Unix(0, a.n.fencedAt.Load()).Sub(killed).Round(time.Millisecond))
	if !a.n.Fenced() || a.n.Leading() {
		t.Errorf("bridge-a, its lease not renewed for 22 s: stepped down %v, leading %v", a.n.Fenced(), a.n.Leading())
	}
	back := time.Now()
	a = startNode(t, natstest.URLs(cluster), "bridge-a", sim.AMIAddr(), 2*time.Second)
	waitFor(t, "the edge heard again, at the bridge's seq and state", 60*time.Second, func() bool {
		if a.stopped() || e.stopped() {
			t.Fatalf("stopped after the outage: bridge %v, edge %v", a.err, e.err)
		}
		return !e.n.Unheard() && e.n.Ready() && live(e.served) && same(a.served, e.served) &&
			e.n.applied.Load() == a.n.applied.Load() && !showsCall(st.Snapshot(), "201", "601")
	})
	t.Logf("the edge live at seq %d %v after the cluster came back", e.n.applied.Load(), time.Since(back).Round(time.Millisecond))
	if !a.n.Leading() {
		t.Error("the fresh bridge-a does not lead after the outage")
	}
	if s := e.n.Stats(); s.ConsumerRetries == 0 || s.UnheardTimes == 0 {
		t.Errorf("the edge's stats after the outage: consumer retries %d, unheard %d times", s.ConsumerRetries, s.UnheardTimes)
	}
}

// startLeaderEdge starts a 3-server JetStream cluster, pbxsim, a bridge
// (a, once it leads) and an edge (e, once it is ready, live, as a).
func startLeaderEdge(t *testing.T, ttl time.Duration) (cluster []*natstest.Server, sim *pbxsim.PBX, a, e *testNode) {
	cluster = natstest.Cluster(t, 3)
	url := natstest.URLs(cluster)
	sim = startSim(t)
	a = startNode(t, url, "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	e = startNode(t, url, "edge-1", "", ttl)
	waitFor(t, "the edge ready and live, as the bridge", 20*time.Second, func() bool { return e.n.Ready() && live(e.served) && same(a.served, e.served) })
	return cluster, sim, a, e
}
