package bus

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/pbxsim"
)

func startSim(t *testing.T) *pbxsim.PBX { return startSimTraced(t, nil) }

// startSimTraced starts pbxsim with trace seeing every frame its
// manager sessions receive.
func startSimTraced(t *testing.T, trace func(*ami.Session, ami.Message)) *pbxsim.PBX {
	p, err := pbxsim.New(pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0", AMITrace: trace})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// testNode is one in-process node. kill cuts it abruptly: its NATS
// connection is closed first (so it cannot release its lease or publish
// again) and its AMI link dropped, as a SIGKILL would.
type testNode struct {
	n      *Node
	served *Replica
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's error, once done
}

func (tn *testNode) kill() {
	tn.n.nc.Close()
	tn.cancel()
	<-tn.done
}

func (tn *testNode) stopped() bool {
	select {
	case <-tn.done:
		return true
	default:
		return false
	}
}

func startNode(t *testing.T, url, name, amiAddr string, ttl time.Duration) *testNode {
	return startNodeWith(t, url, name, amiAddr, ttl, nil)
}

// startNodeWith is startNode with set changing the node's Config.
func startNodeWith(t *testing.T, url, name, amiAddr string, ttl time.Duration, set func(*Config)) *testNode {
	ecfg := calls.Config{FeedSize: 100000}
	tn := &testNode{served: NewReplica(ecfg), done: make(chan struct{})}
	cfg := Config{URL: url, PBX: "pbx1", Node: name, Served: tn.served, Fingerprint: EngineFingerprint(ecfg), LeaseTTL: ttl,
		Log: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)}
	if amiAddr != "" {
		client := ami.NewClient(ami.Config{Addr: amiAddr, Username: "ctibridge", Secret: "ctibridge"})
		primary := NewReplica(ecfg)
		cfg.LinkPBX = NewLinkPBX(client)
		l := link.New(cfg.LinkPBX, primary, link.Config{})
		cfg.Primary, cfg.Actions, cfg.Refresh = primary, client, l.Refresh
		cfg.Lead = func(ctx context.Context) error {
			var wg sync.WaitGroup
			defer wg.Wait()
			cctx, ccancel := context.WithCancel(context.Background())
			defer ccancel()
			wg.Go(func() { client.Run(cctx) })
			return l.Run(ctx)
		}
	}
	if set != nil {
		set(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.n, tn.cancel = n, cancel
	go func() { tn.err = n.Run(ctx); close(tn.done) }()
	t.Cleanup(func() {
		cancel()
		<-tn.done
		n.Close()
	})
	return tn
}

// testLog sends a node's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// same reports whether two replicas serve byte-identical state and feed.
func same(a, b *Replica) bool {
	return a.Engine().Feed().LastSeq() == b.Engine().Feed().LastSeq() && state(a.Engine()) == state(b.Engine())
}

func live(r *Replica) bool { return r.Engine().Snapshot().Link == calls.LinkLive }

// TestNodesServeTheSameState: a bridge node leads (real AMI link to
// pbxsim), an edge follows; after calls placed by a SIP phone both serve
// byte-identical snapshots and feeds under one epoch, and an action sent
// on the edge reaches the PBX through the leader.
func TestNodesServeTheSameState(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	bridge := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), time.Second)
	edge := startNode(t, srv.URL(), "edge-1", "", time.Second)
	if bridge.n.Epoch() != edge.n.Epoch() || bridge.n.OpaqueKey() != edge.n.OpaqueKey() {
		t.Fatal("epoch or opaque key differ between nodes")
	}
	waitFor(t, "the bridge to lead and the state to be live on the edge", 20*time.Second, func() bool { return bridge.n.Leading() && live(edge.served) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := callShown(ctx, t, sim, edge)
	// An action on the edge: hang 201 up through the leader.
	var ch string
	for _, c := range sim.Channels() {
		if strings.Contains(c, "/201-") {
			ch = c
		}
	}
	if _, err := edge.n.Do(ctx, ami.NewAction(ami.ActionHangup, "Channel", ch)); err != nil {
		t.Fatalf("hangup through the edge: %v", err)
	}
	<-call.Done()
	waitFor(t, "the hangup on the edge", 10*time.Second, func() bool {
		return !strings.Contains(string(edge.served.Engine().Snapshot().ExtensionJSON("201")), `"connected"`)
	})
	waitFor(t, "identical state on bridge and edge", 10*time.Second, func() bool { return same(bridge.served, edge.served) })
	// A refused action comes back as the AMI client's error.
	_, err := edge.n.Do(ctx, ami.NewAction(ami.ActionHangup, "Channel", "PJSIP/nobody-00000000"))
	var ae *ami.ActionError
	if !errors.As(err, &ae) {
		t.Fatalf("hangup of no channel through the edge: %v, want an *ami.ActionError", err)
	}
	// Injection is refused on the asking node, before NATS.
	if _, err := edge.n.Do(ctx, ami.NewAction(ami.ActionHangup, "Channel", "x\r\nAction: Logoff")); !errors.Is(err, ami.ErrInjection) {
		t.Fatalf("CR/LF: %v", err)
	}
}

// callShown has a phone 201 call 601 and waits for the call on edge.
func callShown(ctx context.Context, t *testing.T, sim *pbxsim.PBX, edge *testNode) *pbxsim.PhoneCall {
	t.Helper()
	call, err := startPhone(t, sim, "201").Call(ctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	// The call and 201's busy: pbxsim's ExtensionStatus comes after the
	// channel's events, and a state read between the two is not the
	// settled one tests compare later.
	waitFor(t, "201's call on the edge", 10*time.Second, func() bool {
		x := string(edge.served.Engine().Snapshot().ExtensionJSON("201"))
		return strings.Contains(x, `"counterpartNum":"601"`) && strings.Contains(x, `"status":"busy"`)
	})
	return call
}

func startPhone(t *testing.T, sim *pbxsim.PBX, exten string) *pbxsim.Phone {
	ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: exten, Server: sim.SIPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ph.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := ph.Register(rctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	return ph
}
