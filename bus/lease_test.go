package bus

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
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
	if a.stopped() || !a.n.Leading() || b.n.Leading() {
		t.Errorf("after the lease bucket's leader %s died: bridge-a stopped %v (%v), leading %v; bridge-b leading %v",
			victim.Name, a.stopped(), a.err, a.n.Leading(), b.n.Leading())
	}
}
