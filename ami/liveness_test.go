package ami_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// until collects items until stop holds and returns them with the time
// each batch arrived.
func until(t *testing.T, c *ami.Client, within time.Duration, stop func([]ami.Event) bool) ([]ami.Event, []time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var all []ami.Event
	var at []time.Time
	for !stop(all) {
		evs, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v after %d items: %s", err, len(all), summary(all))
		}
		now := time.Now()
		for range evs {
			at = append(at, now)
		}
		all = append(all, evs...)
	}
	return all, at
}

func index(evs []ami.Event, link ami.LinkState) int {
	for i, e := range evs {
		if e.Link == link {
			return i
		}
	}
	return -1
}

// TestClientPingLateStallsThenResumes: a Ping answered late but before the
// timeout reports LinkStalled, then LinkResumed, and keeps the connection.
func TestClientPingLateStallsThenResumes(t *testing.T) {
	srv := amitest.NewServer(t)
	slow := make(chan struct{}, 1)
	srv.Handle("Ping", func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		select {
		case <-slow:
			time.Sleep(300 * time.Millisecond)
		default:
		}
		return []ami.Message{amitest.Response("Success", "Ping", "Pong")}
	})
	cfg := srv.ClientConfig()
	cfg.PingInterval, cfg.PingLate, cfg.PingTimeout = 50*time.Millisecond, 100*time.Millisecond, 10*time.Second
	c := startClient(t, cfg)
	waitConnected(t, c)
	slow <- struct{}{}
	evs, _ := until(t, c, 10*time.Second, func(evs []ami.Event) bool { return count(evs, ami.LinkResumed) == 1 })
	if count(evs, ami.LinkStalled) != 1 || index(evs, ami.LinkStalled) > index(evs, ami.LinkResumed) || count(evs, ami.LinkDown) != 0 {
		t.Fatalf("items: %s", summary(evs))
	}
	if st := c.Stats(); st.LatePings != 1 || st.PingFails != 0 || st.PingRTT <= 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestClientHalfOpen: the PBX end stops answering but keeps the socket
// (bytes swallowed both ways). With the default keep-alive the client
// reports LinkStalled within 3 s, drops the connection and is logged in
// again within 6 s (the bounds asserted here are looser, for a loaded
// machine under -race; the times are logged).
func TestClientHalfOpen(t *testing.T) {
	srv := amitest.NewServer(t)
	px := amitest.NewProxy(t, srv.Addr())
	cfg := srv.ClientConfig()
	cfg.Addr = px.Addr()
	cfg.PingInterval, cfg.PingLate, cfg.PingTimeout = 0, 0, 0 // the defaults
	cfg.ReconnectMin, cfg.ReconnectMax = 0, 0
	c := ami.NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitConnected(t, c)

	frozen := time.Now()
	px.Freeze()
	evs, at := until(t, c, 20*time.Second, func(evs []ami.Event) bool { return count(evs, ami.LinkUp) == 1 })
	st, dn, up := index(evs, ami.LinkStalled), index(evs, ami.LinkDown), index(evs, ami.LinkUp)
	if st < 0 || dn < st || up < dn {
		t.Fatalf("items: %s", summary(evs))
	}
	stale, down, back := at[st].Sub(frozen), at[dn].Sub(frozen), at[up].Sub(frozen)
	t.Logf("half-open link: stalled after %v, dropped after %v, logged in again after %v", stale, down, back)
	if stale > 6*time.Second || back > 12*time.Second {
		t.Errorf("stalled after %v, back after %v: want about 3 s and 6 s", stale, back)
	}
	if s := c.Stats(); s.LatePings < 1 || s.PingFails < 1 || s.Reconnects != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestClientEndlessLine: a line that never ends is a protocol error as
// soon as it passes MaxLine; the client reconnects at once.
func TestClientEndlessLine(t *testing.T) {
	srv := amitest.NewServer(t)
	cfg := srv.ClientConfig()
	cfg.Reader.MaxLine = 4096
	c := startClient(t, cfg)
	waitConnected(t, c)
	sent := time.Now()
	srv.Sessions()[0].SendRaw([]byte("Event: Stuck\r\nK: "+strings.Repeat("x", 5000)), 0)
	evs, at := until(t, c, 10*time.Second, func(evs []ami.Event) bool { return count(evs, ami.LinkUp) == 1 })
	dn := index(evs, ami.LinkDown)
	if dn < 0 || count(evs, ami.LinkStalled) != 0 {
		t.Fatalf("items: %s", summary(evs))
	}
	t.Logf("endless line: link down after %v", at[dn].Sub(sent))
	if s := c.Stats(); s.Oversized != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestClientFastReconnectAfterRestart: after a connection that was up
// drops and the PBX stays away for a while, the client is back within
// about ReconnectFast (500 ms) of the PBX listening again, where the
// plain exponential backoff would have grown to seconds.
func TestClientFastReconnectAfterRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener) *ami.Server {
		s := ami.NewServer(ami.ServerConfig{Users: map[string]string{amitest.User: amitest.Secret}})
		go s.Serve(ln)
		return s
	}
	first := serve(ln)
	cfg := ami.Config{Addr: addr, Username: amitest.User, Secret: amitest.Secret, PingInterval: -1,
		DialTimeout: time.Second, ActionTimeout: 2 * time.Second}
	c := startClient(t, cfg)
	waitConnected(t, c)

	first.Close() // Asterisk stops: the socket closes, nothing listens
	until(t, c, 5*time.Second, func(evs []ami.Event) bool { return count(evs, ami.LinkDown) == 1 })
	time.Sleep(4 * time.Second) // the outage: the exponential cap would reach 4 s
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	back := time.Now()
	second := serve(ln2)
	defer second.Close()
	_, at := until(t, c, 10*time.Second, func(evs []ami.Event) bool { return count(evs, ami.LinkUp) == 1 })
	took := at[len(at)-1].Sub(back)
	t.Logf("PBX back: logged in again after %v", took)
	if took > 3*time.Second {
		t.Errorf("logged in again %v after the PBX came back, want about 0.5 s", took)
	}
}

// TestClientLogsMalformedInput: every kind of malformed input is logged
// once at once (with a sample), then as a count, never once per line.
func TestClientLogsMalformedInput(t *testing.T) {
	var logs syncBuffer
	srv := amitest.NewServer(t)
	cfg := srv.ClientConfig()
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.PingInterval = 20 * time.Millisecond // the keep-alive flushes the counts
	cfg.JunkLogEvery = 50 * time.Millisecond
	c := startClient(t, cfg)
	waitConnected(t, c)
	junk := strings.Repeat("garbage here\r\n", 50) + strings.Repeat("K: a\x00b\r\n", 50) +
		"\r\n" + strings.Repeat("NoEvent: 1\r\n\r\n", 50) + "Event: Done\r\n\r\n"
	srv.Sessions()[0].SendRaw([]byte(junk), 0)
	collect(t, c, hasEvent("Done"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := logs.String()
		ok := true
		for _, kind := range []string{"garbage_line", "control_byte", "headerless_frame"} {
			first, repeated := 0, false
			for line := range strings.Lines(out) {
				switch {
				case !strings.Contains(line, "kind="+kind+" "):
				case strings.Contains(line, `msg="ami malformed input" `):
					first++
				case strings.Contains(line, `msg="ami malformed input repeated" `):
					repeated = repeated || strings.Contains(line, "count=49 ")
				}
			}
			if first != 1 {
				t.Fatalf("%s logged %d times at first:\n%s", kind, first, out)
			}
			ok = ok && repeated
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts not logged:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := c.Stats(); s.Garbage != 100 || s.Headerless != 50 {
		t.Errorf("stats %+v", s)
	}
}
