package ami_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// rawConn is a hand-driven AMI connection for server tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *ami.Reader
	bw *bufio.Writer
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	rc := &rawConn{t: t, nc: nc, r: ami.NewReader(bufio.NewReader(nc), ami.ReaderConfig{}), bw: bufio.NewWriter(nc)}
	if b, err := rc.r.ReadBanner(); err != nil || b != ami.DefaultBanner {
		t.Fatalf("banner %q, %v", b, err)
	}
	return rc
}

func (rc *rawConn) send(m ami.Message) {
	rc.t.Helper()
	if err := ami.WriteMessage(rc.bw, m); err != nil {
		rc.t.Fatal(err)
	}
	if err := rc.bw.Flush(); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) read() ami.Message {
	rc.t.Helper()
	m, err := rc.r.ReadMessage()
	if err != nil {
		rc.t.Fatal(err)
	}
	return m
}

func TestServerAnswers(t *testing.T) {
	srv := amitest.NewServer(t)
	rc := dialRaw(t, srv.Addr())

	rc.send(ami.NewAction("Ping", "ActionID", "1"))
	if m := rc.read(); m.Response() != "Error" || m.Get("Message") != "Permission denied" || m.ActionID() != "1" {
		t.Errorf("before login: %v", m)
	}
	rc.send(ami.NewAction("Login", "ActionID", "2", "Username", amitest.User, "Secret", amitest.Secret))
	if m := rc.read(); m.Response() != "Success" || m.Get("Message") != "Authentication accepted" || m.ActionID() != "2" {
		t.Errorf("login: %v", m)
	}
	if m := rc.read(); m.Event() != "FullyBooted" {
		t.Errorf("after login: %v", m)
	}
	rc.send(ami.NewAction("Ping", "ActionID", "3"))
	if m := rc.read(); m.Response() != "Success" || m.Get("Ping") != "Pong" || m.Get("Timestamp") == "" {
		t.Errorf("ping: %v", m)
	}
	rc.send(ami.NewAction("SIPpeers", "ActionID", "4"))
	want := "Invalid/unknown command: SIPpeers. Use Action: ListCommands to show available commands."
	if m := rc.read(); m.Response() != "Error" || m.Get("Message") != want {
		t.Errorf("unknown: %v", m)
	}
	rc.send(ami.NewAction("Logoff", "ActionID", "5"))
	if m := rc.read(); m.Response() != "Goodbye" || m.Get("Message") != "Thanks for all the fish." {
		t.Errorf("logoff: %v", m)
	}
	if _, err := rc.r.ReadMessage(); err == nil {
		t.Error("connection still open after Logoff")
	}
}

func TestServerLoginFailure(t *testing.T) {
	srv := amitest.NewServer(t)
	rc := dialRaw(t, srv.Addr())
	rc.send(ami.NewAction("Login", "Username", amitest.User, "Secret", "nope"))
	if m := rc.read(); m.Response() != "Error" || m.Get("Message") != "Authentication failed" {
		t.Errorf("login: %v", m)
	}
	if _, err := rc.r.ReadMessage(); err == nil {
		t.Error("connection still open after a failed login")
	}
	if st := srv.Stats(); st.LoginFail != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestServerDropsGarbage(t *testing.T) {
	srv := amitest.NewServerConfig(t, ami.ServerConfig{MaxGarbage: 10})
	good := dialRaw(t, srv.Addr())
	bad := dialRaw(t, srv.Addr())
	bad.bw.WriteString(strings.Repeat("this is not a header\r\n", 50))
	bad.bw.Flush()
	if _, err := bad.r.ReadMessage(); err == nil {
		t.Fatal("garbage sender not dropped")
	}
	good.send(ami.NewAction("Ping", "ActionID", "1"))
	if m := good.read(); m.ActionID() != "1" {
		t.Errorf("other session: %v", m)
	}
	if st := srv.Stats(); st.Garbage != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestServerBroadcastStuckSession: a session that never reads is dropped
// once its queue fills; the others get every event.
func TestServerBroadcastStuckSession(t *testing.T) {
	const clients, rounds, perRound = 4, 100, 50
	srv := amitest.NewServerConfig(t, ami.ServerConfig{QueueSize: 1000})

	stuck := dialRaw(t, srv.Addr())
	stuck.send(ami.NewAction("Login", "Username", amitest.User, "Secret", amitest.Secret))
	stuck.read()

	var cs []*ami.Client
	for range clients {
		c := startClient(t, srv.ClientConfig())
		waitConnected(t, c)
		cs = append(cs, c)
	}
	pad := strings.Repeat("x", 4000)
	var mu sync.Mutex
	got := make([]int, clients)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, c := range cs {
		wg.Go(func() {
			for {
				evs, err := c.Next(ctx)
				if err != nil {
					return
				}
				for _, e := range evs {
					if e.Link == ami.LinkDown {
						t.Errorf("client %d lost its link", i)
						return
					}
				}
				mu.Lock()
				got[i] += len(evs)
				done := got[i] == rounds*perRound
				mu.Unlock()
				if done {
					return
				}
			}
		})
	}
	for r := range rounds {
		for k := range perRound {
			srv.Broadcast(amitest.Event("UserEvent", "N", fmt.Sprint(r*perRound+k), "Pad", pad))
		}
		// Let the readers keep up, as a real event rate would.
		for {
			mu.Lock()
			min := got[0]
			for _, n := range got {
				min = minInt(min, n)
			}
			mu.Unlock()
			if min >= (r+1)*perRound || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	wg.Wait()
	for i, n := range got {
		if n != rounds*perRound {
			t.Errorf("client %d got %d events, want %d", i, n, rounds*perRound)
		}
	}
	if st := srv.Stats(); st.Slow != 1 || st.Active != clients {
		t.Errorf("stats %+v, want the stuck session dropped", st)
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// TestServerAsAsterisk: headers in any order, a frame without Action,
// event classes at login and with the Events action, FullyBooted's uptime.
func TestServerAsAsterisk(t *testing.T) {
	srv := amitest.NewServerConfig(t, ami.ServerConfig{Started: time.Now().Add(-90 * time.Second)})
	rc := dialRaw(t, srv.Addr())

	rc.send(ami.NewMessage(ami.Header{Key: "ActionID", Value: "0"}, ami.Header{Key: "Foo", Value: "bar"}))
	if m := rc.read(); m.Response() != "Error" || m.Get("Message") != "Missing action in request" || m.ActionID() != "0" {
		t.Errorf("no action: %v", m)
	}
	rc.send(ami.NewMessage(ami.Header{Key: "Secret", Value: amitest.Secret}, ami.Header{Key: "Events", Value: "call,agent"},
		ami.Header{Key: "ActionID", Value: "1"}, ami.Header{Key: "Action", Value: "Login"}, ami.Header{Key: "Username", Value: amitest.User}))
	if m := rc.read(); m.Response() != "Success" || m.ActionID() != "1" {
		t.Fatalf("login with Action last: %v", m)
	}
	// No FullyBooted: system is not asked for.
	for _, p := range []string{"system,all", "call,all", "cdr,all", "agent,all"} {
		srv.Broadcast(ami.NewMessage(ami.Header{Key: "Event", Value: "E"}, ami.Header{Key: "Privilege", Value: p}))
	}
	rc.send(ami.NewMessage(ami.Header{Key: "ActionID", Value: "2"}, ami.Header{Key: "Action", Value: "Ping"}))
	var got []string
	for {
		m := rc.read()
		if m.Response() != "" {
			if m.Get("Ping") != "Pong" || m.ActionID() != "2" {
				t.Errorf("ping: %v", m)
			}
			break
		}
		got = append(got, m.Get("Privilege"))
	}
	if strings.Join(got, " ") != "call,all agent,all" {
		t.Errorf("with Events: call,agent got %q", got)
	}

	rc.send(ami.NewAction("Events", "ActionID", "3", "EventMask", "off"))
	if m := rc.read(); m.Response() != "Success" || m.Get("Events") != "Off" {
		t.Errorf("events off: %v", m)
	}
	srv.Broadcast(ami.NewMessage(ami.Header{Key: "Event", Value: "E"}, ami.Header{Key: "Privilege", Value: "call,all"}))
	rc.send(ami.NewAction("Events", "ActionID", "4", "EventMask", "cdr"))
	if m := rc.read(); m.Response() != "Success" || m.Get("Events") != "On" {
		t.Errorf("events cdr: %v", m)
	}
	srv.Broadcast(ami.NewMessage(ami.Header{Key: "Event", Value: "E"}, ami.Header{Key: "Privilege", Value: "call,all"}))
	srv.Broadcast(ami.NewMessage(ami.Header{Key: "Event", Value: "Cdr"}, ami.Header{Key: "Privilege", Value: "cdr,all"}))
	if m := rc.read(); m.Event() != "Cdr" {
		t.Errorf("after Events: cdr got %v", m)
	}

	rc2 := dialRaw(t, srv.Addr())
	rc2.send(ami.NewAction("Login", "Username", amitest.User, "Secret", amitest.Secret, "Events", "system"))
	rc2.read()
	m := rc2.read()
	if up, _ := strconv.Atoi(m.Get("Uptime")); m.Event() != "FullyBooted" || up < 90 || m.Get("LastReload") != m.Get("Uptime") {
		t.Errorf("FullyBooted %v, want Uptime >= 90 and LastReload the same", m)
	}
}
