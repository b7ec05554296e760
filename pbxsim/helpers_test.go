package pbxsim

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/emiago/sipgo/sip"
)

func TestMain(m *testing.M) {
	// Short SIP timers so that unacknowledged answers and lost requests
	// time out within a test (64*T1 = 3.2 s). They are process-global in
	// sipgo, so they are set once here.
	sip.SetTimers(50*time.Millisecond, 400*time.Millisecond, 500*time.Millisecond)
	os.Exit(m.Run())
}

// startPBX runs a PBX on free loopback ports until the test ends.
func startPBX(t testing.TB, cfg Config) *PBX {
	t.Helper()
	if cfg.SIPAddr == "" {
		cfg.SIPAddr = "127.0.0.1:0"
	}
	if cfg.AMIAddr == "" {
		cfg.AMIAddr = "127.0.0.1:0"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// capture is an AMI client that records every message it reads.
type capture struct {
	cli  *ami.Client
	mu   sync.Mutex
	msgs []ami.Message
	cond chan struct{}
}

func startCapture(t testing.TB, addr string) *capture {
	t.Helper()
	c := &capture{cond: make(chan struct{}, 1)}
	c.cli = ami.NewClient(ami.Config{Addr: addr, Username: DefaultAMIUser, Secret: DefaultAMISecret, PingInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.cli.Run(ctx) }()
	up := make(chan struct{})
	go func() {
		defer wg.Done()
		once := sync.Once{}
		for {
			evs, err := c.cli.Next(ctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			for _, e := range evs {
				if e.Link == ami.LinkUp {
					once.Do(func() { close(up) })
				}
				if e.Link == ami.LinkNone {
					c.msgs = append(c.msgs, e.Msg)
				}
			}
			c.mu.Unlock()
			select {
			case c.cond <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-up:
	case <-time.After(5 * time.Second):
		t.Fatal("ami capture: no login")
	}
	return c
}

func (c *capture) all() []ami.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ami.Message(nil), c.msgs...)
}

// waitFor waits until ok holds for the captured messages.
func (c *capture) waitFor(t testing.TB, what string, ok func([]ami.Message) bool) []ami.Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		msgs := c.all()
		if ok(msgs) {
			return msgs
		}
		select {
		case <-c.cond:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timeout waiting for %s; got %d messages", what, len(msgs))
		}
	}
}

func count(msgs []ami.Message, event string, kv ...string) int {
	n := 0
	for _, m := range msgs {
		if m.Event() != event {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if m.Get(kv[i]) != kv[i+1] {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

func startPhone(t testing.TB, p *PBX, cfg PhoneConfig) *Phone {
	t.Helper()
	ph := startPhoneNoReg(t, p, cfg)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := ph.Register(rctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	return ph
}

// startPhoneNoReg runs a phone that does not register (a trunk caller).
func startPhoneNoReg(t testing.TB, p *PBX, cfg PhoneConfig) *Phone {
	t.Helper()
	cfg.Server = p.SIPAddr()
	ph, err := NewPhone(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ph.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ph
}

func waitNoChannels(t testing.TB, p *PBX) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Channels()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("channels still alive: %v", p.Channels())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until the capture holds as many Hangup and Cdr events as
// the recording rec, and then until each extension's hint ends as in rec:
// the last events of a scenario may still be on their way when its
// channels are gone, and an extension's last ExtensionStatus comes after
// its Hangup and the Cdr (a capture taken at the last Hangup showed 201
// busy under load). A hint that never ends as recorded is left to the
// caller's comparison to report.
func (c *capture) settle(t testing.TB, rec []ami.Message) []ami.Message {
	t.Helper()
	msgs := c.waitFor(t, "the last Hangup and Cdr events", func(m []ami.Message) bool {
		return count(m, "Hangup") >= count(rec, "Hangup") && count(m, "Cdr") >= count(rec, "Cdr")
	})
	return c.hints(t, rec, msgs)
}

// hints waits, from msgs on, until each extension's hint ends as in rec,
// and returns the capture then (or at a deadline, left to the caller's
// comparison to report).
func (c *capture) hints(t testing.TB, rec, msgs []ami.Message) []ami.Message {
	t.Helper()
	want := lastHints(rec)
	deadline := time.After(10 * time.Second)
	for {
		got := lastHints(msgs)
		done := true
		for x, st := range want {
			done = done && got[x] == st
		}
		if done {
			return msgs
		}
		select {
		case <-c.cond:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			return msgs
		}
		msgs = c.all()
	}
}

// lastHints is each extension's last ExtensionStatus Status in msgs.
func lastHints(msgs []ami.Message) map[string]string {
	out := map[string]string{}
	for _, m := range msgs {
		if m.Event() == ami.EventExtensionStatus {
			out[m.Get("Exten")] = m.Get("Status")
		}
	}
	return out
}
