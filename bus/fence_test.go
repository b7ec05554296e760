package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amiproxy"
	"github.com/ctibridge/ctibridge/bus/natstest"
)

// TestFenceBound: the grant a leader acts under ends before a standby
// can take over (docs/scale-out.md, "Fencing"): at every TTL the margin
// is TTL/6, 500 ms at the default.
func TestFenceBound(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, DefaultLeaseTTL, 10 * time.Second} {
		if f := fenceBound(ttl); f <= 0 || ttl-f < ttl/6 {
			t.Errorf("ttl %v: grant %v, want at most %v", ttl, f, ttl-ttl/6)
		}
	}
	if got := fenceBound(DefaultLeaseTTL); got != 2500*time.Millisecond {
		t.Errorf("grant at the default TTL: %v, want 2.5s", got)
	}
}

// TestFencedLeaderCutOff: bridge-a leads, its NATS connections go
// through a dialer that partitions it (every byte swallowed both ways,
// no FIN, no RST: its connection looks up, its requests time out; new
// dials fail), while its AMI link to pbxsim stays up. Actions keep
// coming on bridge-a. It must refuse them with ErrStaleLease once its
// grant ran out, and pbxsim, which logs every action it gets, must get
// none of those, nor any from bridge-a after that moment; bridge-a steps
// down (not leading, not ready, its AMI link closed) before bridge-b
// leads and before bridge-b's AMI link opens (timestamps); once the
// partition heals, a fresh bridge-a (as cmd/ctibridge stands one by)
// follows as a standby, and an action asked on it reaches the PBX
// through bridge-b.
func TestFencedLeaderCutOff(t *testing.T) {
	d := newCutDialer()
	testFencedLeader(t, partition{dialer: d, url: natstest.URLs, cut: d.cut, heal: d.heal})
}

// partition is how a test cuts bridge-a off from NATS: its connections
// are made by dialer to url's servers; cut partitions them, heal ends it.
type partition struct {
	dialer    nats.CustomDialer
	url       func(cluster []*natstest.Server) string
	cut, heal func()
}

// testFencedLeader is TestFencedLeaderCutOff's run, partitioned by p.
func testFencedLeader(t *testing.T, p partition) {
	const ttl = 2 * time.Second
	cluster := natstest.Cluster(t, 3)
	url := natstest.URLs(cluster)
	var got pbxLog
	sim := startSimTraced(t, got.trace)
	pxA, pxB := startAMIProxy(t, sim.AMIAddr()), startAMIProxy(t, sim.AMIAddr())
	cutOff := func(c *Config) { c.URL, c.Dialer = p.url(cluster), p.dialer }
	a := startNodeWith(t, url, "bridge-a", pxA.Addr(), ttl, cutOff)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	b := startNode(t, url, "bridge-b", pxB.Addr(), ttl)
	waitFor(t, "bridge-b to follow, live", 20*time.Second, func() bool { return b.n.Ready() && live(b.served) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := a.n.Do(ctx, originate("a-0")); errors.Is(err, ErrStaleLease) {
		t.Fatalf("the leader refused an action before any cut: %v", err)
	}
	waitFor(t, "pbxsim to log the leader's action", 5*time.Second, func() bool { return !got.at("a-0").IsZero() })

	// Who leads, sampled every 2 ms from the cut on.
	var bLedAt atomic.Int64
	sampler, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	cut := time.Now()
	p.cut()
	go func() {
		for both := false; sampler.Err() == nil; {
			if a.n.Leading() && b.n.Leading() && !both {
				both = true
				t.Errorf("bridge-a and bridge-b both leading, %v after the cut", time.Since(cut))
			}
			if b.n.Leading() && bLedAt.Load() == 0 {
				bLedAt.Store(time.Now().UnixNano())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// Actions on bridge-a every 20 ms until a second after it refused.
	refused := map[string]time.Time{}
	accepted := 0
	var firstRefused time.Time
	for i := 1; firstRefused.IsZero() || time.Since(firstRefused) < time.Second; i++ {
		if time.Since(cut) > 4*ttl {
			t.Fatalf("bridge-a still acted %v after its NATS was cut (leading %v)", time.Since(cut), a.n.Leading())
		}
		tag := fmt.Sprintf("a-%d", i)
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		at := time.Now()
		_, err := a.n.Do(c, originate(tag))
		cancel()
		switch {
		case errors.Is(err, ErrStaleLease):
			refused[tag] = at
			if firstRefused.IsZero() {
				firstRefused = at
			}
		case firstRefused.IsZero():
			accepted++
		default:
			t.Errorf("action %s after bridge-a first refused one: %v, want ErrStaleLease", tag, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "bridge-a's Run to return", 10*time.Second, a.stopped)
	if !errors.Is(a.err, ErrLeaseExpired) || !errors.Is(a.err, ErrDeposed) {
		t.Errorf("bridge-a's Run: %v, want ErrLeaseExpired", a.err)
	}
	fencedAt := time.Unix(0, a.n.fencedAt.Load())
	waitFor(t, "bridge-b to lead", 20*time.Second, func() bool { return bLedAt.Load() != 0 })
	bLed := time.Unix(0, bLedAt.Load())
	aClosed, bOpened := pxA.FirstClose(cut), pxB.FirstAccept(cut)
	t.Logf("after the cut: bridge-a accepted %d actions, stepped down %v after it (grant %v), its AMI link closed %v after it; bridge-b led %v after it, its AMI link opened %v after it",
		accepted, fencedAt.Sub(cut).Round(time.Millisecond), fenceBound(ttl), aClosed.Sub(cut).Round(time.Millisecond),
		bLed.Sub(cut).Round(time.Millisecond), bOpened.Sub(cut).Round(time.Millisecond))
	if d := fencedAt.Sub(cut); d > fenceBound(ttl)+300*time.Millisecond {
		t.Errorf("bridge-a stepped down %v after the cut, want within its grant %v", d, fenceBound(ttl))
	}
	// An action checks the window against the clock itself, so it may be
	// refused a moment before the step-down's timer runs (95 us seen under
	// -race); refused well before, it was refused while the grant held.
	if early := fencedAt.Sub(firstRefused); early > 200*time.Millisecond {
		t.Errorf("bridge-a refused an action at %v, %v before it stepped down at %v", firstRefused, early, fencedAt)
	}
	if !fencedAt.Before(bLed) {
		t.Errorf("bridge-a stepped down at %v, not before bridge-b led at %v", fencedAt, bLed)
	}
	if aClosed.IsZero() || bOpened.IsZero() || !aClosed.Before(bOpened) {
		t.Errorf("bridge-a's AMI link closed at %v, bridge-b's opened at %v: want closed first", aClosed, bOpened)
	}
	// What pbxsim got: none of the refused actions, and nothing of
	// bridge-a's once bridge-b's link was open (two nodes driving the
	// PBX). An action checked inside the grant may still be on its way
	// when the step-down's timer runs (24 ms seen at load 26): the grant
	// ends TTL/6 before a standby can take over for that.
	for tag := range refused {
		if at := got.at(tag); !at.IsZero() {
			t.Errorf("pbxsim got %s at %v, which bridge-a refused as stale", tag, at)
		}
	}
	var lastA time.Time
	for _, e := range got.all() {
		if e.tag == "" || e.tag[0] != 'a' {
			continue
		}
		lastA = e.at
		if !e.at.Before(bOpened) {
			t.Errorf("pbxsim got %s at %v, after bridge-b's AMI link opened at %v", e.tag, e.at, bOpened)
		}
	}
	t.Logf("bridge-a's last action reached pbxsim %v after it stepped down, %v before bridge-b's link opened",
		lastA.Sub(fencedAt).Round(time.Millisecond), bOpened.Sub(lastA).Round(time.Millisecond))
	if s := a.n.Stats(); s.Role == "leader" || !s.LeaseExpired || s.StaleRefused < uint64(len(refused)) || a.n.Ready() || a.n.Leading() {
		t.Errorf("bridge-a after stepping down: role %s, lease expired %v, stale refused %d (of %d), ready %v, leading %v",
			s.Role, s.LeaseExpired, s.StaleRefused, len(refused), a.n.Ready(), a.n.Leading())
	}

	// Healed: a fresh bridge-a follows as a standby.
	p.heal()
	a2 := startNodeWith(t, url, "bridge-a", pxA.Addr(), ttl, cutOff)
	waitFor(t, "the fresh bridge-a to follow bridge-b's state", 20*time.Second, func() bool {
		return a2.n.Ready() && live(a2.served) && same(a2.served, b.served)
	})
	time.Sleep(2 * ttl)
	if a2.n.Leading() || !b.n.Leading() || a2.n.Stats().Role != "standby" {
		t.Errorf("after the heal: the fresh bridge-a leading %v (role %s), bridge-b leading %v", a2.n.Leading(), a2.n.Stats().Role, b.n.Leading())
	}
	if _, err := a2.n.Do(ctx, originate("a2-1")); errors.Is(err, ErrStaleLease) || errors.Is(err, ami.ErrNotConnected) {
		t.Errorf("an action on the fresh bridge-a: %v, want it forwarded to bridge-b", err)
	}
	if got.at("a2-1").IsZero() {
		t.Error("pbxsim did not get the action asked on the fresh bridge-a")
	}
}

// originate is an action pbxsim logs by its tag (the Variable header).
func originate(tag string) ami.Message {
	return ami.NewAction(ami.ActionOriginate, "Channel", "PJSIP/299", "Exten", "601", "Context", "from-internal",
		"Priority", "1", "Async", "true", "Variable", "FENCE="+tag)
}

// pbxLog is every action a PBX got, with its FENCE tag.
type pbxLog struct {
	mu      sync.Mutex
	entries []pbxAction
}

type pbxAction struct {
	at  time.Time
	tag string
}

func (l *pbxLog) trace(_ *ami.Session, m ami.Message) {
	if m.Action() == "" {
		return
	}
	tag := ""
	if v, ok := m.Lookup("Variable"); ok && len(v) > len("FENCE=") && v[:len("FENCE=")] == "FENCE=" {
		tag = v[len("FENCE="):]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, pbxAction{at: time.Now(), tag: tag})
}

func (l *pbxLog) all() []pbxAction {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]pbxAction(nil), l.entries...)
}

// at is when the PBX got the action tagged tag (zero: never).
func (l *pbxLog) at(tag string) time.Time {
	for _, e := range l.all() {
		if e.tag == tag {
			return e.at
		}
	}
	return time.Time{}
}

// startAMIProxy relays AMI connections to addr, noting when each opens
// and closes.
func startAMIProxy(t *testing.T, addr string) *amiproxy.Proxy {
	p, err := amiproxy.New(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// cutDialer makes a node's NATS connections and partitions them on cut:
// every byte is swallowed both ways and the sockets stay open (no FIN,
// no RST: the client believes it is connected), and new dials fail
// after a second, as into a partition. heal lets dials through again
// and closes the partitioned sockets, as TCP gives up on them, so the
// client reconnects.
type cutDialer struct {
	mu    sync.Mutex
	down  bool
	conns map[*cutConn]struct{}
}

func newCutDialer() *cutDialer { return &cutDialer{conns: map[*cutConn]struct{}{}} }

func (d *cutDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	down := d.down
	d.mu.Unlock()
	if down {
		time.Sleep(time.Second)
		return nil, errors.New("partitioned: no route")
	}
	c, err := net.DialTimeout(network, address, 2*time.Second)
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: c}
	d.mu.Lock()
	d.conns[cc] = struct{}{}
	d.mu.Unlock()
	return cc, nil
}

func (d *cutDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = true
	for c := range d.conns {
		c.dead.Store(true)
	}
}

func (d *cutDialer) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = false
	for c := range d.conns {
		if c.dead.Load() {
			c.Conn.Close()
			delete(d.conns, c)
		}
	}
}

type cutConn struct {
	net.Conn
	dead atomic.Bool
}

func (c *cutConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.dead.Load() {
			return n, err
		}
		// Partitioned: what came is lost.
	}
}

func (c *cutConn) Write(b []byte) (int, error) {
	if c.dead.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}
