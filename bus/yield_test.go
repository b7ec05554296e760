package bus

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

const testYieldAfter = 3 * time.Second

// deadAddr is an address nobody listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// probes counts a node's Reachable calls and keeps the shortest gap
// between two.
type probes struct {
	mu     sync.Mutex
	n      int64
	last   time.Time
	minGap time.Duration
	gaps   []time.Duration // between one probe and the next, in order
}

func (p *probes) Load() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *probes) allGaps() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.gaps...)
}

func (p *probes) gap() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.minGap
}

// probing makes a node's Reachable an AMI login at addr with secret,
// counted in n.
func probing(addr, secret string, n *probes) func(*Config) {
	return func(c *Config) {
		c.YieldAfter = testYieldAfter
		c.Reachable = func(ctx context.Context) error {
			n.mu.Lock()
			if n.n > 0 && (n.minGap == 0 || time.Since(n.last) < n.minGap) {
				n.minGap = time.Since(n.last)
			}
			if n.n > 0 {
				n.gaps = append(n.gaps, time.Since(n.last))
			}
			n.n++
			n.last = time.Now()
			n.mu.Unlock()
			return ami.Probe(ctx, ami.Config{Addr: addr, Username: pbxsim.DefaultAMIUser, Secret: secret})
		}
	}
}

// cutOffLeader starts a nats-server, a pbxsim and bridge-a, which leads
// pbx1 with a dead AMI address: its link never comes up.
func cutOffLeader(t *testing.T, ttl time.Duration) (*natstest.Server, *pbxsim.PBX, *testNode) {
	srv := natstest.Start(t)
	sim := startSim(t)
	var probesA probes
	dead := deadAddr(t)
	a := startNodeWith(t, srv.URL(), "bridge-a", dead, ttl, probing(dead, pbxsim.DefaultAMISecret, &probesA))
	waitFor(t, "bridge-a to lead", 20*time.Second, a.n.Leading)
	return srv, sim, a
}

// TestYieldToStandbyThatLogsIn: bridge-a leads pbx1 but its AMI address
// is dead for it; bridge-b reaches the PBX (pbxsim). Past YieldAfter,
// bridge-a asks, bridge-b's probe logs in, bridge-a hands over (Run:
// ErrHandedOver) and bridge-b leads within YieldAfter and a few
// seconds; the edge goes from down to live, never live before
// bridge-b leads, never stalled.
func TestYieldToStandbyThatLogsIn(t *testing.T) {
	const ttl = 2 * time.Second
	srv, sim, a := cutOffLeader(t, ttl)
	var probesB probes
	aLed := time.Now() // its link down from its start
	edge := startNodeWith(t, srv.URL(), "edge-1", "", ttl, nil)
	waitFor(t, "the edge to follow", 20*time.Second, edge.n.ready.Load)
	before := edge.served.Engine().Feed().LastSeq()
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, probing(sim.AMIAddr(), pbxsim.DefaultAMISecret, &probesB))
	started := time.Now()
	var liveEarly atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() { // live on the edge while bridge-b does not lead yet is stale state shown as live
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if live(edge.served) && !b.n.Leading() {
				liveEarly.Store(true)
			}
		}
	}()
	waitFor(t, "bridge-b to lead", testYieldAfter+3*ttl+5*time.Second, b.n.Leading)
	led := time.Since(started)
	waitFor(t, "bridge-a to step down", 10*time.Second, a.stopped)
	if !errors.Is(a.err, ErrHandedOver) {
		t.Errorf("bridge-a's Run returned %v, want ErrHandedOver", a.err)
	}
	waitFor(t, "pbx1 live on the edge", 20*time.Second, func() bool { return live(edge.served) })
	st := strings.Join(pbxStatuses(edge.served, before), " ")
	t.Logf("yield: bridge-b leads %v after bridge-a led (its link down throughout; %v after bridge-b started), the edge is live %v after; edge pbxStatus %s",
		(time.Since(aLed) - time.Since(started) + led).Round(time.Millisecond), led.Round(time.Millisecond), time.Since(aLed).Round(time.Millisecond), st)
	if liveEarly.Load() {
		t.Error("the edge showed live before bridge-b led")
	}
	if strings.Contains(st, "stalled") || !strings.HasSuffix(st, "live") {
		t.Errorf("edge pbxStatus: %s, want down ... live, never stalled", st)
	}
	if probesB.Load() == 0 {
		t.Error("bridge-b led without probing the PBX")
	}
}

// TestNoYieldWhenNoStandbyLogsIn: both bridges' AMI address is dead (or
// the standby's secret is wrong). bridge-a keeps the lead, asking about
// once a YieldAfter, and nothing is handed over.
func TestNoYieldWhenNoStandbyLogsIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		standby func(t *testing.T, sim *pbxsim.PBX) (addr, secret string)
	}{
		{"both cut off", func(t *testing.T, _ *pbxsim.PBX) (string, string) { return deadAddr(t), pbxsim.DefaultAMISecret }},
		{"standby's secret wrong", func(t *testing.T, sim *pbxsim.PBX) (string, string) { return sim.AMIAddr(), "wrong" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ttl = 2 * time.Second
			srv, sim, a := cutOffLeader(t, ttl)
			var probesB probes
			addr, secret := tc.standby(t, sim)
			b := startNodeWith(t, srv.URL(), "bridge-b", addr, ttl, probing(addr, secret, &probesB))
			waitFor(t, "bridge-b to follow", 20*time.Second, b.n.ready.Load)
			started := time.Now()
			waitFor(t, "bridge-a to ask bridge-b", 2*testYieldAfter+5*time.Second, func() bool { return probesB.Load() > 0 })
			time.Sleep(3 * testYieldAfter)
			if !a.n.Leading() || b.n.Leading() || a.stopped() {
				t.Fatalf("bridge-a leading %v (stopped %v), bridge-b leading %v: want the lead kept by bridge-a", a.n.Leading(), a.stopped(), b.n.Leading())
			}
			if h := a.n.Stats().Handovers; h != 0 {
				t.Errorf("bridge-a handed over %d times", h)
			}
			// After a refusal, the leader waits YieldAfter before it asks again.
			if n, gap := probesB.Load(), probesB.gap(); n < 2 || gap < testYieldAfter {
				t.Errorf("bridge-b was asked %d times in %v, %v apart at the least: want 2 at least, %v apart (no yield loop)",
					n, time.Since(started).Round(time.Millisecond), gap.Round(time.Millisecond), testYieldAfter)
			}
			t.Logf("bridge-b probed %d times in %v, %v apart at the least", probesB.Load(), time.Since(started).Round(time.Millisecond), probesB.gap().Round(time.Millisecond))
		})
	}
}

// TestPreferredWithWrongSecretDoesNotLead: bridge-a leads pbx1 and
// logs in; bridge-b prefers pbx1 but its secret is wrong. Its
// Reachable (an AMI login) fails, so it never asks for the lead:
// bridge-a keeps it, and the PBX stays live; bridge-b logs in once a
// TTL at first, not at every renewal, then less and less often.
func TestPreferredWithWrongSecretDoesNotLead(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	var probesA, probesB probes
	a := startNodeWith(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl, probing(sim.AMIAddr(), pbxsim.DefaultAMISecret, &probesA))
	waitFor(t, "bridge-a to lead, live", 20*time.Second, func() bool { return a.n.Leading() && live(a.served) })
	wrong := probing(sim.AMIAddr(), "wrong", &probesB)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, func(c *Config) { wrong(c); c.Prefer = true })
	waitFor(t, "bridge-b to probe", 20*time.Second, func() bool { return probesB.Load() > 0 })
	// Probes a TTL, then 2 TTLs apart (backing off): the third 3 TTLs on.
	waitFor(t, "bridge-b to probe thrice", 30*time.Second, func() bool { return probesB.Load() >= 3 })
	if !a.n.Leading() || b.n.Leading() || !live(a.served) {
		t.Fatalf("bridge-a leading %v (live %v), bridge-b leading %v: want bridge-a to keep the lead", a.n.Leading(), live(a.served), b.n.Leading())
	}
	// Each probe is a failed login on the PBX: once a TTL at first, not
	// at every renewal, then twice as long after each failure.
	if gap := probesB.gap(); gap < ttl*9/10 {
		t.Errorf("bridge-b probed %v apart at the least: want a TTL (%v) apart", gap.Round(time.Millisecond), ttl)
	}
	if gaps := probesB.allGaps(); len(gaps) < 2 || gaps[1] < 2*ttl*9/10 {
		t.Errorf("bridge-b's probes %v apart: want the second gap twice the TTL (%v), backing off", gaps, ttl)
	}
}

func TestProbeBackoff(t *testing.T) {
	const ttl = 3 * time.Second
	for fails, want := range map[int]time.Duration{1: ttl, 2: 2 * ttl, 3: 4 * ttl, 7: 64 * ttl, 8: maxProbeBackoff, 60: maxProbeBackoff} {
		if got := probeBackoff(fails, ttl); got != want {
			t.Errorf("probeBackoff(%d, %v) = %v, want %v", fails, ttl, got, want)
		}
	}
}

// heldRelay is an AMI address that holds every connection silent (the
// client waits for the banner) until open, then relays them all to the
// PBX: a leader's link that is down and comes back at a chosen moment.
type heldRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   bool
	held   []net.Conn
	conns  []net.Conn
}

func newHeldRelay(t *testing.T, target string) *heldRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &heldRelay{ln: ln, target: target}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			if r.open {
				go r.relay(c)
			} else {
				r.held = append(r.held, c)
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.Close()
		}
	})
	return r
}

func (r *heldRelay) addr() string { return r.ln.Addr().String() }

// release relays the held connections and every later one.
func (r *heldRelay) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = true
	for _, c := range r.held {
		go r.relay(c)
	}
	r.held = nil
}

func (r *heldRelay) relay(down net.Conn) {
	defer down.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { io.Copy(up, down); up.Close() }()
	io.Copy(down, up)
}

// TestNoYieldWhenLinkComesBackWhileAsking: bridge-a leads pbx1, its
// AMI link held down (the connection gets no banner); past YieldAfter
// it asks bridge-b, which logs in. While bridge-b's probe runs, bridge-a's
// link comes back (bridge-b's Reachable releases it and answers yes only
// once bridge-a publishes its link as up): bridge-a keeps the lead, hands
// nothing over, and pbx1 is live on both.
func TestNoYieldWhenLinkComesBackWhileAsking(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	relay := newHeldRelay(t, sim.AMIAddr())
	var probesA, probesB probes
	a := startNodeWith(t, srv.URL(), "bridge-a", relay.addr(), ttl, probing(relay.addr(), pbxsim.DefaultAMISecret, &probesA))
	waitFor(t, "bridge-a to lead", 20*time.Second, a.n.Leading)
	var asked atomic.Bool
	probeB := probing(sim.AMIAddr(), pbxsim.DefaultAMISecret, &probesB)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, func(c *Config) {
		probeB(c)
		reach := c.Reachable
		c.Reachable = func(ctx context.Context) error {
			if asked.CompareAndSwap(false, true) && a.n.linkDownFor() > 0 { // the first ask: bridge-a's link comes back now
				relay.release()
				for a.n.linkDownFor() > 0 {
					select {
					case <-ctx.Done():
						return errors.New("bridge-a's link did not come back within the probe")
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			return reach(ctx)
		}
	})
	waitFor(t, "bridge-a to ask bridge-b", testYieldAfter+3*ttl+10*time.Second, asked.Load)
	waitFor(t, "pbx1 live on bridge-b", 20*time.Second, func() bool { return live(b.served) })
	time.Sleep(2 * ttl) // past the ask's window and the lease bridge-b was invited to take
	if !a.n.Leading() || a.stopped() || b.n.Leading() {
		t.Fatalf("bridge-a leading %v (stopped %v, Run: %v), bridge-b leading %v: want the lead kept by bridge-a", a.n.Leading(), a.stopped(), a.err, b.n.Leading())
	}
	if h := a.n.Stats().Handovers; h != 0 {
		t.Errorf("bridge-a handed over %d times", h)
	}
	if !live(a.served) || !live(b.served) {
		t.Errorf("pbx1 live on bridge-a %v, on bridge-b %v: want live on both", live(a.served), live(b.served))
	}
	if probesB.Load() == 0 {
		t.Error("bridge-b was never asked")
	}
}
