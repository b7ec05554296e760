package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
)

// TestLeaseBucketLeaderKilled: the nats-server leading the lease
// bucket's stream is killed (SIGKILL). Until the bucket has a new
// JetStream leader (nats-server's election takes 4 to 9 s) nobody can
// write the lease, the leader's renewals fail, while a standby still
// reads the revision standing still (the replicas answer reads). The
// standby must not count that time (found by `ctibridge-lab loadtest
// failover`, which killed NATS servers: a live leader was deposed in 2 of
// 6 such kills), and the leader, which cannot tell an election from a
// partition, steps down when its grant runs out (fence.go): at no moment
// do both lead, and once the bucket takes writes again one of them leads
// (bridge-b a TTL after the election, or bridge-a if the election was
// shorter than its grant).
func TestLeaseBucketLeaderKilled(t *testing.T) {
	const ttl = 2 * time.Second
	cluster, _, _, a, b := startLeaderStandby(t, ttl)
	waitFor(t, "bridge-b to follow", 20*time.Second, func() bool { return live(b.served) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := leaseLeader(ctx, t, a.n, cluster)
	killed := time.Now()
	victim.Kill()
	defer victim.Restart()
	// The election, then a TTL's worth of renewals.
	var bLed time.Duration
	for time.Since(killed) < 9*time.Second+2*ttl {
		if a.n.Leading() && b.n.Leading() {
			t.Fatalf("bridge-a and bridge-b both lead %v after the lease bucket's leader died", time.Since(killed))
		}
		if bLed == 0 && b.n.Leading() {
			bLed = time.Since(killed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("bridge-b read the lease bucket's leader %d times; bridge-a stepped down: %v (%v after the kill); bridge-b led %v after it",
		b.n.Stats().LeaderChecks, a.n.Fenced(), time.Unix(0, a.n.fencedAt.Load()).Sub(killed).Round(time.Millisecond), bLed.Round(time.Millisecond))
	switch {
	case a.n.Leading() == b.n.Leading():
		t.Errorf("after the lease bucket's leader %s died: bridge-a leading %v, bridge-b leading %v: want one", victim.Name, a.n.Leading(), b.n.Leading())
	case a.stopped() && !errors.Is(a.err, ErrLeaseExpired):
		t.Errorf("bridge-a stopped with %v, want ErrLeaseExpired", a.err)
	}
}

// leaseLeader is the server leading the lease bucket's stream.
func leaseLeader(ctx context.Context, t *testing.T, n *Node, cluster []*natstest.Server) *natstest.Server {
	t.Helper()
	st, err := n.js.Stream(ctx, "KV_"+LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("the lease bucket's stream: %v %+v", err, info)
	}
	for _, s := range cluster {
		if s.Name == info.Cluster.Leader {
			return s
		}
	}
	t.Fatalf("the lease bucket's leader %q is none of the servers", info.Cluster.Leader)
	return nil
}

// moveLeaseLeader makes sure off does not lead the lease bucket's
// stream (asking its leader to step down): tests that kill off to test
// something else keep the leader's renewals going (a leader that cannot
// renew for its grant steps down, fence.go).
func moveLeaseLeader(ctx context.Context, t *testing.T, n *Node, cluster []*natstest.Server, off *natstest.Server) {
	t.Helper()
	for try := 0; leaseLeader(ctx, t, n, cluster) == off; try++ {
		if try == 10 {
			t.Fatalf("%s still leads the lease bucket after %d step-downs", off.Name, try)
		}
		if _, err := n.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN.KV_"+LeaseBucket, nil); err != nil {
			t.Logf("the lease bucket's leader step-down: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startQuietBridge starts a bridge node whose "link" publishes nothing of
// its own (no AMI).
func startQuietBridge(t *testing.T, url, name string, ttl time.Duration) *testNode {
	return startNodeWith(t, url, name, "", ttl, func(c *Config) {
		c.Primary = NewReplica(calls.Config{})
		c.Lead = func(ctx context.Context) error { <-ctx.Done(); return nil }
	})
}

// TestLeaseLeaderChecks: a standby reads the lease bucket's JetStream
// leader (a stream-info request) only when a takeover is in view: none
// while the leader renews, two (at half the TTL of stand-still and at
// the TTL) when it dies, before the standby takes over (four if a read
// timed out on this busy machine: the count starts again).
func TestLeaseLeaderChecks(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	a := startQuietBridge(t, srv.URL(), "bridge-a", ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b := startQuietBridge(t, srv.URL(), "bridge-b", ttl)
	waitFor(t, "bridge-b to follow", 20*time.Second, b.n.ready.Load)
	time.Sleep(4 * ttl)
	if got := b.n.Stats().LeaderChecks; got != 0 {
		t.Errorf("the standby read the bucket's leader %d times in %v of renewals, want 0", got, 4*ttl)
	}
	a.kill()
	waitFor(t, "bridge-b to lead", 10*time.Second, b.n.Leading)
	if got := b.n.Stats().LeaderChecks; got != 2 && got != 4 {
		t.Errorf("the standby read the bucket's leader %d times before it took over, want 2", got)
	}
}
