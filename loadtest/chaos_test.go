package loadtest

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/dbtest"
)

func TestChaosConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  ChaosConfig
		want string
	}{
		{ChaosConfig{}, "no ctibridge binary"},
		{ChaosConfig{Binary: "/nonexistent/ctibridge"}, "no such file"},
		{ChaosConfig{Binary: "/bin/true", Scenarios: []string{"ami", "disk"}}, `unknown scenario "disk"`},
		{ChaosConfig{Binary: "/bin/true", Faults: []string{"kill", "flap"}}, `unknown fault "flap"`},
	} {
		err := c.cfg.setDefaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}
}

// Invariants always fail a run; targets only for the scenarios named.
func TestChaosReportFailed(t *testing.T) {
	r := &ChaosReport{Counters: map[string]float64{}}
	r.check("ami", "t1", "22s", "3s", false, false)
	r.check("db", "t2", "2", "0", false, false)
	r.check("db", "i1", "0", "0", true, true)
	if f := r.Failed(); len(f) != 0 {
		t.Errorf("no strict: %v", f)
	}
	if f := r.Failed("db"); len(f) != 1 || !strings.HasPrefix(f[0], "db: t2") {
		t.Errorf("strict db: %v", f)
	}
	r.check("ws", "i2", "1", "0", false, true)
	if f := r.Failed(); len(f) != 1 || !strings.HasPrefix(f[0], "ws: i2") {
		t.Errorf("a failed invariant: %v", f)
	}
}

func TestChannelExten(t *testing.T) {
	for in, want := range map[string]string{"PJSIP/3001-0000000a": "3001", "PJSIP/trunk-x-00000001": "trunk-x", "3002": "3002"} {
		if got := channelExten(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// A disagreement counts only once pbxsim's truth has held for the grace.
func TestTruthJudge(t *testing.T) {
	var mu sync.Mutex
	busy := map[string]bool{"1": true, "2": true}
	tr := newTruth(func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for k, v := range busy {
			out[k] = v
		}
		return out
	})
	tr.poll()
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	delete(busy, "2") // 2 hangs up now
	mu.Unlock()
	// The bridge shows 2 still in a call and 1 not: within the grace,
	// both are fair (events in flight).
	g, m := tr.judge(map[string]bool{"2": true}, time.Now(), 20*time.Millisecond)
	if len(g) != 0 || len(m) != 1 || m[0].exten != "1" {
		t.Errorf("ghosts %v, missing %v; want no ghost yet and 1 missing", g, m)
	}
	time.Sleep(30 * time.Millisecond)
	g, _ = tr.judge(map[string]bool{"2": true}, time.Now(), 20*time.Millisecond)
	if len(g) != 1 || g[0].exten != "2" {
		t.Errorf("ghosts %v, want 2", g)
	}
}

// fakeAMI is a manager port that sends a banner, then whatever is written
// to events, and echoes nothing.
func fakeAMI(t *testing.T) (addr string, conns chan net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("Asterisk Call Manager/11.0.0\r\n"))
			conns <- c
		}
	}()
	return ln.Addr().String(), conns
}

func TestAMIProxyFaults(t *testing.T) {
	addr, ups := fakeAMI(t)
	p, err := newAMIProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	dial := func() (net.Conn, net.Conn, *bufio.Reader) {
		down, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		up := <-ups
		br := bufio.NewReader(down)
		if l, _ := br.ReadString('\n'); !strings.HasPrefix(l, "Asterisk Call Manager") {
			t.Fatalf("banner %q", l)
		}
		return down, up, br
	}
	// Forwarding, and the Cdr events are noted.
	down, up, br := dial()
	up.Write([]byte("Event: Cdr\r\nUniqueID: 1700000000.1\r\n\r\n"))
	for _, want := range []string{"Event: Cdr\r\n", "UniqueID: 1700000000.1\r\n", "\r\n"} {
		if l, _ := br.ReadString('\n'); l != want {
			t.Fatalf("forwarded %q, want %q", l, want)
		}
	}
	dbtest.WaitFor(t, "the Cdr seen by the proxy", func() bool { return len(p.cdrsSeen()) == 1 && p.cdrsSeen()[0].uniqueid == "1700000000.1" })

	// Half-open: nothing passes either way, both sockets stay open.
	p.Fault(faultHalfOpen)
	up.Write([]byte("Event: Cdr\r\nUniqueID: 1700000000.2\r\n\r\n"))
	down.Write([]byte("Action: Ping\r\n\r\n"))
	down.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := br.Read(make([]byte, 64)); n != 0 || !isTimeout(err) {
		t.Errorf("half-open: read %d bytes, %v", n, err)
	}
	up.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := up.Read(make([]byte, 64)); n != 0 || !isTimeout(err) {
		t.Errorf("half-open: pbxsim read %d bytes, %v", n, err)
	}
	// Kill: the bridge's socket closes.
	p.Fault(faultKill)
	down.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("kill: %v", err)
	}
	down.Close()

	// A line that never ends: far more than any line limit arrives. (The
	// pbxsim side is kept referenced: a net.Conn the garbage collector
	// finalizes is closed, which would end the connection.)
	down, up, br = dial()
	defer up.Close()
	p.Fault(faultLongLine)
	down.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.CopyN(io.Discard, br, 256<<10)
	if n != 256<<10 {
		t.Errorf("long line: %d bytes, %v", n, err)
	}
	down.Close()
	dbtest.WaitFor(t, "the second connection", func() bool { return p.Accepted() == 2 && len(p.cdrsSeen()) == 1 })
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
