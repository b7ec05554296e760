package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// startBridge starts a bridge's node for each of pbxs (on the PBX of the
// same index in sims) under one node name, preferring the PBX prefer.
func startBridge(t *testing.T, url, name string, sims []*pbxsim.PBX, pbxs []string, prefer string, ttl time.Duration) []*testNode {
	var out []*testNode
	for i, pbx := range pbxs {
		out = append(out, startNodeWith(t, url, name, sims[i].AMIAddr(), ttl, func(c *Config) {
			c.PBX, c.Prefer = pbx, pbx == prefer
		}))
	}
	return out
}

func pbxStatuses(r *Replica, since uint64) []string {
	changes, _ := r.Engine().Feed().Since(since)
	var out []string
	for _, c := range changes {
		if c.Type == calls.PBXStatus {
			s := string(c.Data)
			for _, st := range []string{"down", "resyncing", "live", "stalled"} {
				if strings.Contains(s, `"`+st+`"`) {
					s = st
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// TestPreferredLeaders: two bridges follow two PBXs, bridge-a preferring
// pbx1, bridge-b pbx2. Bridge-a, started first, leads both; bridge-b,
// started with a call up on pbx2, is handed pbx2 over: one leader each.
// An edge of pbx2 follows the handover with its seqs (same epoch, no
// snapshot to take), the call shown throughout, pbxStatus resyncing
// then live and never down or stalled; bridge-a's pbx2 Run returns
// ErrHandedOver, its pbx1 node is untouched. The call hung up under
// bridge-b is gone on the edge. Then bridge-b is killed: a fresh
// standby of bridge-a's takes pbx2 over after the TTL; bridge-b started
// again (the same name) gets pbx2 back by a handover.
func TestPreferredLeaders(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sims := []*pbxsim.PBX{startSim(t), startSim(t)}
	pbxs := []string{"pbx1", "pbx2"}
	a := startBridge(t, srv.URL(), "bridge-a", sims, pbxs, "pbx1", ttl)
	waitFor(t, "bridge-a to lead both", 30*time.Second, func() bool { return a[0].n.Leading() && a[1].n.Leading() })
	edge := startNodeWith(t, srv.URL(), "edge-1", "", ttl, func(c *Config) { c.PBX = "pbx2" })
	waitFor(t, "pbx2 live on the edge", 20*time.Second, func() bool { return live(edge.served) })

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	call := callShown(ctx, t, sims[1], edge)
	conv := string(edge.served.Engine().Snapshot().ExtensionJSON("201"))
	before := edge.served.Engine().Feed().LastSeq()

	started := time.Now()
	b := startBridge(t, srv.URL(), "bridge-b", sims, pbxs, "pbx2", ttl)
	waitFor(t, "bridge-b to lead pbx2", 20*time.Second, b[1].n.Leading)
	led := time.Since(started)
	waitFor(t, "bridge-a's pbx2 node to step down", 10*time.Second, a[1].stopped)
	if !errors.Is(a[1].err, ErrHandedOver) {
		t.Errorf("bridge-a's pbx2 Run returned %v, want ErrHandedOver", a[1].err)
	}
	waitFor(t, "pbx2 live on the edge under bridge-b", 20*time.Second, func() bool { return live(edge.served) })
	t.Logf("handover: bridge-b leads pbx2 %v after it started, the edge is live again %v after", led.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	if st := pbxStatuses(edge.served, before); len(st) < 2 || st[0] != "resyncing" || st[len(st)-1] != "live" || strings.Contains(strings.Join(st, " "), "down") || strings.Contains(strings.Join(st, " "), "stalled") {
		t.Errorf("pbx2's pbxStatus on the edge across the handover: %v, want resyncing ... live, never down or stalled", st)
	}
	checkStepDown(t, edge.n, "bridge-b", calls.LinkResyncing)
	if _, ok := edge.served.Engine().Feed().Since(before); !ok {
		t.Error("the edge's feed cannot resume from its seq before the handover")
	}
	if got := string(edge.served.Engine().Snapshot().ExtensionJSON("201")); got != conv {
		t.Errorf("201's call across the handover:\n%s\nbefore:\n%s", got, conv)
	}
	if a[0].stopped() || !a[0].n.Leading() || b[0].n.Leading() {
		t.Errorf("pbx1: bridge-a stopped %v (%v) leading %v, bridge-b leading %v; want bridge-a", a[0].stopped(), a[0].err, a[0].n.Leading(), b[0].n.Leading())
	}
	if s := a[1].n.Stats(); s.Handovers != 1 {
		t.Errorf("bridge-a's pbx2 node: %d handovers, want 1", s.Handovers)
	}
	call.Hangup(ctx)
	waitFor(t, "the hangup under bridge-b on the edge", 10*time.Second, func() bool {
		return !strings.Contains(string(edge.served.Engine().Snapshot().ExtensionJSON("201")), `"counterpartNum":"601"`)
	})

	// bridge-a stands by for pbx2 again (cmd/ctibridge starts a fresh
	// node so); bridge-b dies, and comes back.
	a2 := startNodeWith(t, srv.URL(), "bridge-a", sims[1].AMIAddr(), ttl, func(c *Config) { c.PBX = "pbx2" })
	waitFor(t, "bridge-a's new pbx2 node to follow", 20*time.Second, func() bool { return live(a2.served) })
	b[0].kill()
	b[1].kill()
	waitFor(t, "bridge-a to lead pbx2 after bridge-b's death", 20*time.Second, a2.n.Leading)
	waitFor(t, "pbx2 live on the edge under bridge-a", 20*time.Second, func() bool { return live(edge.served) })
	b2 := startBridge(t, srv.URL(), "bridge-b", sims, pbxs, "pbx2", ttl)
	waitFor(t, "the restarted bridge-b to get pbx2 back", 20*time.Second, b2[1].n.Leading)
	waitFor(t, "bridge-a's new pbx2 node to step down", 10*time.Second, a2.stopped)
	waitFor(t, "pbx2 live on the edge under the restarted bridge-b", 20*time.Second, func() bool { return live(edge.served) })
	time.Sleep(ttl) // a fenced-off publish or a lost lease would show meanwhile
	if !errors.Is(a2.err, ErrHandedOver) || b2[1].stopped() || !b2[1].n.Leading() || !a[0].n.Leading() || b2[0].n.Leading() {
		t.Errorf("after bridge-b's restart: bridge-a's pbx2 Run %v; bridge-b leads pbx2 %v (stopped %v: %v); pbx1 led by bridge-a %v, bridge-b %v",
			a2.err, b2[1].n.Leading(), b2[1].stopped(), b2[1].err, a[0].n.Leading(), b2[0].n.Leading())
	}
}

// TestPreferredLeaderKeeps: a leader that is preferred keeps the lead
// when another preferred bridge stands by, and a bridge with no
// preference is never asked to lead: nothing changes without one.
func TestPreferredLeaderKeeps(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	prefer := func(c *Config) { c.Prefer = true }
	a := startNodeWith(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl, prefer)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, prefer)
	c := startNode(t, srv.URL(), "bridge-c", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-b and bridge-c to follow", 20*time.Second, func() bool { return live(b.served) && live(c.served) })
	time.Sleep(3 * ttl) // bridge-b asks once a TTL
	if a.stopped() || !a.n.Leading() || b.n.Leading() || c.n.Leading() || a.n.Stats().Handovers != 0 {
		t.Errorf("bridge-a (preferred) stopped %v (%v), leading %v, %d handovers; bridge-b (preferred) leading %v; bridge-c leading %v",
			a.stopped(), a.err, a.n.Leading(), a.n.Stats().Handovers, b.n.Leading(), c.n.Leading())
	}
}

// TestPreferredUnreachable: a preferred bridge that does not reach its
// PBX (Config.Reachable fails) asks for no handover: the leader keeps
// the lead.
func TestPreferredUnreachable(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, func(c *Config) {
		c.Prefer = true
		c.Reachable = func(context.Context) error { return errors.New("connection refused") }
	})
	waitFor(t, "bridge-b to follow", 20*time.Second, func() bool { return live(b.served) })
	time.Sleep(3 * ttl)
	if a.stopped() || !a.n.Leading() || b.n.Leading() {
		t.Errorf("bridge-a stopped %v (%v), leading %v; bridge-b (preferred, PBX out of reach) leading %v", a.stopped(), a.err, a.n.Leading(), b.n.Leading())
	}
}

// checkStepDown fails unless the message before the last lead record of
// node to in n's stream is the old leader's last: SetLink(state) and
// Publish.
func checkStepDown(t *testing.T, n *Node, to string, state calls.LinkState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := n.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.LastSeq; seq > info.State.FirstSeq; seq-- {
		m, err := n.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if k, _, l, err := decodeControl(m.Data); err != nil || k != kindLead || l.Node != to {
			continue
		}
		prev, err := n.stream.GetMsg(ctx, seq-1)
		if err != nil {
			t.Fatal(err)
		}
		d := prev.Data
		if len(d) < 4 || d[0] != version || d[1] != kindOps || d[2] != opSetLink || d[len(d)-3] != byte(state) || d[len(d)-2] != opPublish {
			t.Errorf("the message before %s's lead record (seq %d): % x, want SetLink(%v) and Publish", to, seq, d, state)
		}
		return
	}
	t.Errorf("no lead record of %s in the stream", to)
}

// TestHandoverSafePoint: a leader with a batch half published (or a
// link change under way) does not step down: asked, it answers busy
// after LeaseTTL/6 and publishes nothing; at a batch's end it publishes
// its last message (its link was down: down), hands the lease to the
// asking node, and Run returns ErrHandedOver.
func TestHandoverSafePoint(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	a := startQuietBridge(t, srv.URL(), "bridge-a", ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	last := a.n.pubSeqNow()
	for _, mid := range []func(bool){
		func(on bool) { // a batch being chunked out: a chunk a moment ago
			a.n.chunkAt = time.Time{}
			if on {
				a.n.chunkAt = time.Now().Add(time.Hour)
			}
		},
		func(on bool) { a.n.midLink = on }, // a link change under way
	} {
		a.n.handMu.Lock()
		a.n.pubMu.Lock()
		mid(true)
		a.n.pubMu.Unlock()
		a.n.handMu.Unlock()
		if got := a.n.handOver("bridge-b"); got != handBusy || a.stopped() || a.n.pubSeqNow() != last {
			t.Errorf("asked mid-batch (chunk at %v, midLink %v): answer %d, stopped %v, published up to %d (was %d); want busy, leading, nothing published",
				a.n.chunkAt, a.n.midLink, got, a.stopped(), a.n.pubSeqNow(), last)
		}
		a.n.handMu.Lock()
		a.n.pubMu.Lock()
		mid(false)
		a.n.pubMu.Unlock()
		a.n.handMu.Unlock()
	}
	if got := a.n.handOver("bridge-b"); got != handOK {
		t.Fatalf("asked at a batch's end: answer %d, want ok", got)
	}
	waitFor(t, "bridge-a's Run to return", 10*time.Second, a.stopped)
	if !errors.Is(a.err, ErrHandedOver) {
		t.Errorf("Run returned %v, want ErrHandedOver", a.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := a.n.js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "pbx1")
	if err != nil || string(e.Value()) != "bridge-b" {
		t.Fatalf("the lease after the handover: %v %v, want bridge-b", e, err)
	}
	m, err := a.n.stream.GetMsg(ctx, last+1)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Data; len(d) < 4 || d[2] != opSetLink || d[len(d)-3] != byte(calls.LinkDown) {
		t.Errorf("bridge-a's last message: % x, want SetLink(down) and Publish", d)
	}
}
