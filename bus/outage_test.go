package bus

import (
	"context"
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
// edge and the bridge stay up, the edge says stale all along and is not
// ready; once the cluster is whole it hears its stream again, at the
// bridge's seq and state, with the hangup the bridge published once it
// could (its link's events held meanwhile, none lost).
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
		for _, n := range []*testNode{a, e} {
			if n.stopped() {
				t.Fatalf("%s stopped %v into the outage: %v", n.n.cfg.Node, time.Since(killed).Round(time.Millisecond), n.err)
			}
		}
		if s := st.Snapshot(); !s.Stale || !s.Unheard || e.n.Ready() {
			t.Fatalf("%v into the outage the edge says stale %v, unheard %v, ready %v", time.Since(killed).Round(time.Millisecond), s.Stale, s.Unheard, e.n.Ready())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := natstest.Rejoin(cluster, cluster[1:]); err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster whole again %v after the kill", time.Since(killed).Round(time.Millisecond))
	back := time.Now()
	waitFor(t, "the edge heard again, at the bridge's seq and state", 60*time.Second, func() bool {
		if a.stopped() || e.stopped() {
			t.Fatalf("stopped after the outage: bridge %v, edge %v", a.err, e.err)
		}
		return !e.n.Unheard() && e.n.Ready() && live(e.served) && same(a.served, e.served) &&
			e.n.applied.Load() == a.n.applied.Load() && !showsCall(st.Snapshot(), "201", "601")
	})
	t.Logf("the edge live at seq %d %v after the cluster came back", e.n.applied.Load(), time.Since(back).Round(time.Millisecond))
	if !a.n.Leading() {
		t.Error("bridge-a stopped leading across the outage")
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
