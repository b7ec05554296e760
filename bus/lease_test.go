package bus

import (
	"context"
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
// standby must not count that time: once the bucket takes writes again
// the leader renews, and it is not deposed (found by `ctibridge loadtest
// failover`, which killed NATS servers: a live leader was deposed in 2 of
// 6 such kills).
func TestLeaseBucketLeaderKilled(t *testing.T) {
	const ttl = 2 * time.Second
	cluster, _, _, a, b := startLeaderStandby(t, ttl)
	waitFor(t, "bridge-b to follow", 20*time.Second, func() bool { return live(b.served) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.n.js.Stream(ctx, "KV_"+LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("the lease bucket's stream: %v %+v", err, info)
	}
	var victim *natstest.Server
	for _, s := range cluster {
		if s.Name == info.Cluster.Leader {
			victim = s
		}
	}
	if victim == nil {
		t.Fatalf("the lease bucket's leader %q is none of the servers", info.Cluster.Leader)
	}
	victim.Kill()
	defer victim.Restart()
	// The election, then a TTL's worth of renewals.
	time.Sleep(9*time.Second + 2*ttl)
	t.Logf("bridge-b read the lease bucket's leader %d times", b.n.Stats().LeaderChecks)
	if a.stopped() || !a.n.Leading() || b.n.Leading() {
		t.Errorf("after the lease bucket's leader %s died: bridge-a stopped %v (%v), leading %v; bridge-b leading %v",
			victim.Name, a.stopped(), a.err, a.n.Leading(), b.n.Leading())
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
