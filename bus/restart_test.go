package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
)

// TestLeadAgainUnderSameName: a bridge that led, was killed and was
// started again under the same node name (as systemd restarts it) takes
// over when the other bridge dies, and its publishes land: the edge goes
// live again and the bridge is not fenced off. Its former self's message
// ids are still in JetStream's duplicate window (2 minutes), so ids that
// were only node/count answered its lead record and first batches as
// duplicates of old messages (found by `ctibridge-lab loadtest failover`).
func TestLeadAgainUnderSameName(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	const ttl = 2 * time.Second
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b := startNode(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl)
	e := startNode(t, srv.URL(), "edge-1", "", ttl)
	waitFor(t, "live on the edge", 20*time.Second, func() bool { return live(e.served) })
	a.kill()
	waitFor(t, "bridge-b to lead", 15*time.Second, b.n.Leading)
	waitFor(t, "live on the edge after the first takeover", 20*time.Second, func() bool { return live(e.served) })
	a2 := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "the restarted bridge-a to follow", 20*time.Second, func() bool { return live(a2.served) })
	b.kill()
	waitFor(t, "the restarted bridge-a to lead", 15*time.Second, a2.n.Leading)
	waitFor(t, "live on the edge after the second takeover", 20*time.Second, func() bool { return live(e.served) || a2.stopped() })
	time.Sleep(ttl) // a fenced-off publish would depose it meanwhile
	if a2.stopped() || !a2.n.Leading() || !live(e.served) {
		t.Errorf("restarted bridge-a: stopped %v (%v), leading %v; edge live %v", a2.stopped(), a2.err, a2.n.Leading(), live(e.served))
	}
}

// TestDeposedRunReturns: a leader whose lease is taken from it steps
// down, and Run returns ErrDeposed (its goroutines stopped, the lease's
// renewal among them) and the node no longer says it leads.
func TestDeposedRunReturns(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), 2*time.Second)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := a.n.js.KeyValue(ctx, "ctibridge_leases")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "pbx1", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bridge-a's Run to return", 10*time.Second, a.stopped)
	if !errors.Is(a.err, ErrDeposed) {
		t.Errorf("Run returned %v, want ErrDeposed", a.err)
	}
	if a.n.Leading() {
		t.Error("a deposed node's Run returned and it still says it leads")
	}
}
