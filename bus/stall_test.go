package bus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
)

// TestStallMarkerLiveLeader: an edge marks the state stalled while the
// leader is alive (as when the leader was only slow). Every node shows
// stalled at one seq, the leader is not deposed: it adopts the marker
// and publishes live again, and its later batches reach the edge.
func TestStallMarkerLiveLeader(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	bridge := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), 2*time.Second)
	edge := startNode(t, srv.URL(), "edge-1", "", 2*time.Second)
	waitFor(t, "the bridge to lead and the state to be live on the edge", 20*time.Second, func() bool { return bridge.n.Leading() && live(edge.served) })
	waitFor(t, "identical state on bridge and edge", 10*time.Second, func() bool { return same(bridge.served, edge.served) })
	before := edge.served.Engine().Feed().LastSeq()

	if !edge.n.markStalled(context.Background(), edge.n.applied.Load()) {
		t.Fatal("the edge's stall marker was not stored")
	}
	// A second marker on the same seq is refused by the fence.
	if edge.n.markStalled(context.Background(), edge.n.applied.Load()-1) {
		t.Fatal("a marker expecting an old seq was stored")
	}
	waitFor(t, "live again on the edge (the leader's restore)", 10*time.Second, func() bool {
		return live(edge.served) && edge.served.Engine().Feed().LastSeq() > before+1
	})
	changes, ok := edge.served.Engine().Feed().Since(before)
	var states []string
	for _, c := range changes {
		if c.Type == calls.PBXStatus {
			states = append(states, string(c.Data))
		}
	}
	if !ok || len(states) != 2 || !strings.Contains(states[0], `"stalled"`) || !strings.Contains(states[1], `"live"`) {
		t.Fatalf("pbxStatus after the marker: %v (ok %v), want stalled then live", states, ok)
	}

	// The leader goes on: a call reaches the edge, same state everywhere.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := callShown(ctx, t, sim, edge)
	defer call.Hangup(ctx)
	waitFor(t, "identical state on bridge and edge", 10*time.Second, func() bool { return same(bridge.served, edge.served) })
	if bridge.stopped() || !bridge.n.Leading() {
		t.Fatalf("the leader stepped down after a stall marker: %v", bridge.err)
	}
	// What /metrics says of it.
	es, bs := edge.n.Stats(), bridge.n.Stats()
	if es.Role != "edge" || es.StallsWritten < 1 || es.StallsApplied < 1 || es.Applied == 0 || es.AppliedBytes == 0 || es.Published != 0 {
		t.Errorf("edge stats %+v", es)
	}
	if bs.Role != "leader" || bs.StallsApplied < 1 || bs.Takeovers != 1 || bs.Published == 0 || bs.PublishedBytes == 0 || bs.Generation != 1 {
		t.Errorf("bridge stats %+v", bs)
	}
}

// TestCutOffNotReady: an edge that loses NATS cannot be told the state
// is stalled; it stops saying it is ready.
func TestCutOffNotReady(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	bridge := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), time.Second)
	edge := startNode(t, srv.URL(), "edge-1", "", time.Second)
	waitFor(t, "the edge ready", 20*time.Second, func() bool { return bridge.n.Leading() && edge.n.Ready() })
	edge.n.nc.Close()
	waitFor(t, "the edge cut off from NATS not ready", 10*time.Second, func() bool { return !edge.n.Ready() })
	if !live(edge.served) {
		t.Fatal("the cut-off edge's state changed: only the stream may change it")
	}
}

// TestStallCodec: a marker round-trips, and is refused as ops.
func TestStallCodec(t *testing.T) {
	s := stall{Node: "edge-1", At: 1_700_000_000_123_456_789}
	got, err := decodeStall(s.encode())
	if err != nil || got != s {
		t.Fatalf("decodeStall = %+v, %v; want %+v", got, err, s)
	}
	if _, err := decodeStall(s.encode()[:5]); err == nil {
		t.Fatal("a truncated marker decoded")
	}
	r := NewReplica(calls.Config{})
	if err := r.Replay(s.encode()); err == nil {
		t.Fatal("a marker replayed as ops")
	}
	// linkOps: what holds a restore back until a batch's end.
	for _, c := range []struct {
		ops  []byte
		want bool
	}{
		{[]byte{version, kindOps, opFollowups, 0, 1, opRefresh, 2}, false},
		{[]byte{version, kindOps, opName, 1, '1', 0, opBeginResync, 0}, true},
		{[]byte{version, kindOps, opFollowups, 0, 1, opSetLink, 2, byte(calls.LinkLive)}, true},
		{[]byte{version, kindOps, 99}, true}, // undecodable: held back
	} {
		if got := linkOps(c.ops); got != c.want {
			t.Errorf("linkOps(%v) = %v, want %v", c.ops, got, c.want)
		}
	}
}
