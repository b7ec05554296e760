package bus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestFailover: a 3-server JetStream cluster, two bridges on one pbxsim,
// two edges. The leading bridge is cut abruptly (in-process: its NATS
// connection closed, so it neither releases the lease nor publishes
// again, and its AMI link dropped); a watcher marks the state stalled
// after half the lease TTL, the other bridge takes over within the lease
// TTL plus a resync, the edges go stale (stalled, down, resyncing) then
// live, a call that ended while nobody held the link is gone (no ghost),
// one placed meanwhile shows, and a reader resumes from the seq it had
// before the takeover on the other edge. Then one NATS server is killed
// and the service goes on.
func TestFailover(t *testing.T) {
	const ttl = 2 * time.Second
	cluster, url, sim, a, b := startLeaderStandby(t, ttl)
	e1 := startNode(t, url, "edge-1", "", ttl)
	e2 := startNode(t, url, "edge-2", "", ttl)
	waitFor(t, "live on both edges", 20*time.Second, func() bool { return live(e1.served) && live(e2.served) })

	ph1, ph2 := startPhone(t, sim, "201"), startPhone(t, sim, "202")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, err := ph1.Call(ctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	shows := func(r *Replica, exten, num string) bool {
		return strings.Contains(string(r.Engine().Snapshot().ExtensionJSON(exten)), `"counterpartNum":"`+num+`"`)
	}
	waitFor(t, "201's call on both edges", 10*time.Second, func() bool { return shows(e1.served, "201", "601") && shows(e2.served, "201", "601") })
	waitFor(t, "the same seq and state on both edges", 10*time.Second, func() bool { return same(e1.served, e2.served) })
	before := e1.served.Engine().Feed().LastSeq()

	killed := time.Now()
	a.kill()
	// The watchers mark the state stalled before the takeover: no client
	// is told live while nobody follows the PBX.
	waitFor(t, "stale on both edges", 10*time.Second, func() bool { return !live(e1.served) && !live(e2.served) })
	stale, bLed := time.Since(killed), b.n.Leading()
	// While nobody holds the link: 201 hangs up, 202 calls.
	call.Hangup(ctx)
	call2, err := ph2.Call(ctx, "602")
	if err != nil {
		t.Fatal(err)
	}
	defer call2.Hangup(ctx)
	waitFor(t, "bridge-b to lead", 15*time.Second, b.n.Leading)
	led := time.Since(killed)
	waitFor(t, "live again on both edges", 20*time.Second, func() bool { return live(e1.served) && live(e2.served) })
	t.Logf("takeover: edges stale %v after the kill (bridge-b leading then: %v), bridge-b leads %v after it, edges live %v after it",
		stale.Round(time.Millisecond), bLed, led.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	for _, e := range []*testNode{e1, e2} {
		if shows(e.served, "201", "601") {
			t.Errorf("ghost: 201's ended call still shown after the resync: %s", e.served.Engine().Snapshot().ExtensionJSON("201"))
		}
	}
	waitFor(t, "202's call, placed during the takeover, on both edges", 10*time.Second, func() bool { return shows(e1.served, "202", "602") && shows(e2.served, "202", "602") })
	waitFor(t, "the same seq and state on both edges after the takeover", 10*time.Second, func() bool { return same(e1.served, e2.served) })

	// A reader of edge-1 at seq `before` resumes on edge-2: the changes
	// since are there, and they say the state went stale then live.
	changes, ok := e2.served.Engine().Feed().Since(before)
	if !ok || len(changes) == 0 {
		t.Fatalf("resume on edge-2 from seq %d: ok=%v, %d changes", before, ok, len(changes))
	}
	var states []string
	for _, c := range changes {
		if c.Type == calls.PBXStatus {
			states = append(states, string(c.Data))
		}
	}
	// First stalled (a watcher's marker, before the takeover), then down
	// (the new leader), then live.
	if len(states) < 3 || !strings.Contains(states[0], `"stalled"`) || !strings.Contains(states[1], `"down"`) || !strings.Contains(states[len(states)-1], `"live"`) {
		t.Errorf("pbxStatus changes across the takeover: %v, want stalled, down ... live", states)
	}

	// One NATS server dies: the stream (3 replicas) and the lease go on.
	// Not the lease bucket's leader: bridge-b would step down during
	// the election (TestLeaseBucketLeaderKilled).
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	victim := cluster[0]
	if leaseLeader(lctx, t, b.n, cluster) == victim {
		victim = cluster[1]
	}
	lcancel()
	victim.Kill()
	call2.Hangup(ctx)
	call3, err := ph1.Call(ctx, "603")
	if err != nil {
		t.Fatal(err)
	}
	defer call3.Hangup(ctx)
	natsKilled := time.Now()
	waitFor(t, "a call placed after a NATS server died, on both edges", 45*time.Second, func() bool {
		for _, n := range []*testNode{b, e1, e2} {
			if n.stopped() {
				t.Fatalf("%s stopped after a NATS server died: %v", n.n.cfg.Node, n.err)
			}
		}
		return shows(e1.served, "201", "603") && shows(e2.served, "201", "603") && !shows(e1.served, "202", "602")
	})
	t.Logf("a NATS server died: the call placed then shows on both edges %v later", time.Since(natsKilled).Round(time.Millisecond))
	// A watcher may have marked the state stalled while the election
	// held the lease's renewal up; the leader, alive, says live again.
	waitFor(t, "live on edge-1 after a NATS server died", 20*time.Second, func() bool { return live(e1.served) })
	if !b.n.Leading() || e1.served.Engine().Snapshot().Link != calls.LinkLive {
		t.Errorf("after a NATS server died: bridge-b leading %v, edge-1 %v", b.n.Leading(), e1.served.Engine().Snapshot().Link)
	}
}

// startLeaderStandby starts a 3-server JetStream cluster (url its
// servers), pbxsim, and two bridges on it: a, once it leads, then b.
func startLeaderStandby(t *testing.T, ttl time.Duration) (cluster []*natstest.Server, url string, sim *pbxsim.PBX, a, b *testNode) {
	cluster = natstest.Cluster(t, 3)
	url = natstest.URLs(cluster)
	sim = startSim(t)
	a = startNode(t, url, "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b = startNode(t, url, "bridge-b", sim.AMIAddr(), ttl)
	return cluster, url, sim, a, b
}
