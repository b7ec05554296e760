package ami_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// startClient runs a client until the end of the test.
func startClient(t *testing.T, cfg ami.Config) *ami.Client {
	t.Helper()
	if cfg.PingInterval == 0 {
		cfg.PingInterval = -1 // pings would add frames to what tests assert
	}
	c := ami.NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	})
	return c
}

// collect calls Next until stop(all items so far) holds.
func collect(t *testing.T, c *ami.Client, stop func([]ami.Event) bool) []ami.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var all []ami.Event
	for !stop(all) {
		evs, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v after %d items: %s", err, len(all), summary(all))
		}
		all = append(all, evs...)
	}
	return all
}

func summary(evs []ami.Event) string {
	var b strings.Builder
	for _, e := range evs {
		switch {
		case e.Link != ami.LinkNone:
			b.WriteString("[" + e.Link.String() + "] ")
		case e.Msg.Kind() == ami.KindEvent:
			b.WriteString(e.Msg.Event() + " ")
		default:
			b.WriteString(e.Msg.Kind().String() + ":" + e.Msg.Headers()[0].Value + " ")
		}
	}
	return b.String()
}

func count(evs []ami.Event, link ami.LinkState) int {
	n := 0
	for _, e := range evs {
		if e.Link == link {
			n++
		}
	}
	return n
}

func hasEvent(name string) func([]ami.Event) bool {
	return func(evs []ami.Event) bool {
		for _, e := range evs {
			if e.Msg.Event() == name {
				return true
			}
		}
		return false
	}
}

// waitConnected waits for the first LinkUp (and the FullyBooted after it).
func waitConnected(t *testing.T, c *ami.Client) []ami.Event {
	t.Helper()
	evs := collect(t, c, hasEvent("FullyBooted"))
	if evs[0].Link != ami.LinkUp {
		t.Fatalf("first item = %s, want LinkUp", summary(evs))
	}
	return evs
}

func TestClientLogin(t *testing.T) {
	for _, md5 := range []bool{false, true} {
		t.Run(fmt.Sprintf("md5=%v", md5), func(t *testing.T) {
			t.Parallel()
			srv := amitest.NewServer(t)
			cfg := srv.ClientConfig()
			cfg.MD5 = md5
			c := startClient(t, cfg)
			waitConnected(t, c)
			if !c.Connected() {
				t.Fatal("not connected after LinkUp")
			}
			login := srv.WaitAction("Login", 1)
			if login.Get("Username") != amitest.User || login.Get("Events") != "on" || login.ActionID() == "" {
				t.Errorf("login = %v", login)
			}
			if md5 {
				ch := srv.WaitAction("Challenge", 1)
				if ch.Get("AuthType") != "MD5" {
					t.Errorf("challenge = %v", ch)
				}
				if _, ok := login.Lookup("Secret"); ok || login.Get("AuthType") != "md5" || len(login.Get("Key")) != 32 {
					t.Errorf("md5 login = %v", login)
				}
			} else if login.Get("Secret") != amitest.Secret {
				t.Errorf("login = %v", login)
			}
		})
	}
}

// TestClientLoginBurst replays a real recording: Asterisk sends the login
// response, FullyBooted and SuccessfulAuth in one write. Every event must
// reach the consumer after LinkUp, identical to the recording.
func TestClientLoginBurst(t *testing.T) {
	data, err := os.ReadFile("testdata/basic_call_caller_hangup.ami")
	if err != nil {
		t.Fatal(err)
	}
	want := readFrames(t, data)[1:] // all but the login response
	for _, chunk := range []int{0, 1, 7, 1500} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			t.Parallel()
			srv := amitest.NewServer(t)
			srv.Replay(data, chunk)
			c := startClient(t, srv.ClientConfig())
			evs := collect(t, c, func(evs []ami.Event) bool { return len(evs) == len(want)+1 })
			if evs[0].Link != ami.LinkUp || count(evs, ami.LinkDown) != 0 {
				t.Fatalf("items: %s", summary(evs))
			}
			events := 0
			for i, m := range want {
				got := evs[i+1].Msg
				if !equalHeaders(got, m) {
					t.Fatalf("item %d = %v, want %v", i+1, got, m)
				}
				if got.Kind() == ami.KindEvent {
					events++
				}
			}
			if events != 85 || evs[1].Msg.Event() != "FullyBooted" {
				t.Errorf("%d events, first %q; want 85, FullyBooted", events, evs[1].Msg.Event())
			}
		})
	}
}

func readFrames(t testing.TB, data []byte) []ami.Message {
	t.Helper()
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	var out []ami.Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

func equalHeaders(a, b ami.Message) bool {
	if len(a.Headers()) != len(b.Headers()) {
		return false
	}
	for i := range a.Headers() {
		if a.Headers()[i] != b.Headers()[i] {
			return false
		}
	}
	return true
}

// TestClientDoPipelined sends 50 Pings at once; the server answers only
// when all 50 have arrived (so they must be pipelined), in reverse order.
func TestClientDoPipelined(t *testing.T) {
	const n = 50
	srv := amitest.NewServer(t)
	var mu sync.Mutex
	var held []ami.Message
	var sess *ami.Session
	srv.Handle("Ping", func(_ context.Context, s *ami.Session, req ami.Message) []ami.Message {
		mu.Lock()
		defer mu.Unlock()
		held, sess = append(held, req), s
		if len(held) == n {
			for i := n - 1; i >= 0; i-- {
				s.Send(amitest.Response("Success", "ActionID", held[i].ActionID(), "Ping", "Pong", "Seq", held[i].Get("Seq")))
			}
		}
		return nil
	})
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	_ = sess

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.Do(context.Background(), ami.NewAction("Ping", "Seq", fmt.Sprint(i)))
			if err == nil && resp.Get("Seq") != fmt.Sprint(i) {
				err = fmt.Errorf("ping %d got %v", i, resp.Message)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	ids := map[string]bool{}
	for _, a := range srv.Actions() {
		if a.Action() == "Ping" {
			ids[a.ActionID()] = true
		}
	}
	if len(ids) != n {
		t.Errorf("%d distinct ActionIDs, want %d", len(ids), n)
	}
}

// listAnswer returns, from a recording, the frames answering actionID.
func listAnswer(t *testing.T, file, actionID string) []ami.Message {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []ami.Message
	for _, m := range readFrames(t, data) {
		if m.ActionID() == actionID {
			out = append(out, m)
		}
	}
	if len(out) < 2 {
		t.Fatalf("no list %s in %s", actionID, file)
	}
	return out
}

func TestClientEventList(t *testing.T) {
	const rec = "testdata/status_actions_during_call.ami"
	channels := listAnswer(t, rec, "coreshowchannels-2")
	queues := listAnswer(t, rec, "queuestatus-9")
	srv := amitest.NewServer(t)
	srv.Handle("CoreShowChannels", func(context.Context, *ami.Session, ami.Message) []ami.Message {
		return channels // the server rewrites their ActionID
	})
	// QueueStatus items arrive with an unsolicited event in the middle.
	srv.Handle("QueueStatus", func(_ context.Context, s *ami.Session, req ami.Message) []ami.Message {
		for i, m := range queues {
			s.Send(m.Set("ActionID", req.ActionID()))
			if i == 2 {
				s.Send(amitest.Event("Newchannel", "Channel", "PJSIP/205-00000001"))
			}
		}
		return nil
	})
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	ctx := context.Background()

	for _, tc := range []struct {
		action string
		want   []ami.Message
		last   string
	}{
		{"CoreShowChannels", channels, "CoreShowChannelsComplete"},
		{"QueueStatus", queues, "QueueStatusComplete"},
	} {
		resp, err := c.Do(ctx, ami.NewAction(tc.action))
		if err != nil {
			t.Fatalf("%s: %v", tc.action, err)
		}
		if resp.Get("EventList") != "start" || len(resp.Items) != len(tc.want)-1 {
			t.Fatalf("%s: response %v with %d items, want %d", tc.action, resp.Message, len(resp.Items), len(tc.want)-1)
		}
		if last := resp.Items[len(resp.Items)-1]; last.Event() != tc.last || last.Get("EventList") != "Complete" {
			t.Errorf("%s: last item %v", tc.action, last)
		}
		for i, it := range resp.Items {
			if it.Event() != tc.want[i+1].Event() || it.ActionID() != resp.ActionID() {
				t.Errorf("%s: item %d = %v", tc.action, i, it)
			}
		}
	}
	evs := collect(t, c, hasEvent("Newchannel"))
	for _, e := range evs {
		if e.Msg.ActionID() != "" {
			t.Errorf("list item leaked to the consumer: %v", e.Msg)
		}
	}
}

func TestClientActionError(t *testing.T) {
	srv := amitest.NewServer(t)
	srv.Expect("Originate", "Exten", "999").Reply(amitest.Response("Error", "Message", "Extension does not exist."))
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	ctx := context.Background()

	resp, err := c.Do(ctx, ami.NewAction("Originate", "Channel", "PJSIP/201", "Exten", "999"))
	var ae *ami.ActionError
	if !errors.As(err, &ae) || ae.Action != "Originate" || ae.Message != "Extension does not exist." {
		t.Fatalf("err = %v", err)
	}
	if resp.Response() != "Error" {
		t.Errorf("resp = %v", resp.Message)
	}
	_, err = c.Do(ctx, ami.NewAction("SIPpeers"))
	if !errors.As(err, &ae) || !strings.HasPrefix(ae.Message, "Invalid/unknown command: SIPpeers.") {
		t.Fatalf("unknown action err = %v", err)
	}
}

func TestClientRefusesInjection(t *testing.T) {
	srv := amitest.NewServer(t)
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	ctx := context.Background()
	for _, m := range []ami.Message{
		ami.NewAction("Originate", "Channel", "PJSIP/201\r\nAction: Command\r\nCommand: core stop now"),
		ami.NewAction("Originate", "Exten", "201\x00"),
		ami.NewAction("Originate", "Bad\nKey", "x"),
	} {
		_, err := c.Do(ctx, m)
		if !errors.Is(err, ami.ErrInjection) {
			t.Errorf("Do(%q) err = %v, want ErrInjection", m.Headers(), err)
		}
	}
	if _, err := c.Do(ctx, ami.NewAction("Ping")); err != nil {
		t.Fatal(err)
	}
	// Frames arrive in order: once the Ping is in, anything written before
	// it would have been too.
	var names []string
	for _, a := range srv.Actions() {
		names = append(names, a.Action())
	}
	if got := strings.Join(names, ","); got != "Login,Ping" {
		t.Errorf("server received %s, want Login,Ping", got)
	}
}

func TestClientReconnect(t *testing.T) {
	srv := amitest.NewServer(t)
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	srv.Broadcast(amitest.Event("UserEvent", "N", "1"))
	collect(t, c, hasEvent("UserEvent"))

	srv.Drop()
	evs := collect(t, c, hasEvent("FullyBooted"))
	if count(evs, ami.LinkDown) != 1 || count(evs, ami.LinkUp) != 1 || evs[0].Link != ami.LinkDown {
		t.Fatalf("after drop: %s", summary(evs))
	}
	srv.Broadcast(amitest.Event("UserEvent", "N", "2"))
	evs = collect(t, c, hasEvent("UserEvent"))
	if evs[len(evs)-1].Msg.Get("N") != "2" {
		t.Errorf("got %s", summary(evs))
	}
	if st := c.Stats(); st.Connects != 2 || st.Reconnects != 1 || srv.Connections() != 2 {
		t.Errorf("stats %+v, server connections %d", st, srv.Connections())
	}
}

func TestClientPendingLost(t *testing.T) {
	srv := amitest.NewServer(t)
	srv.Silence("Originate")
	c := startClient(t, srv.ClientConfig())
	waitConnected(t, c)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), ami.NewAction("Originate", "Channel", "PJSIP/201"))
		errc <- err
	}()
	srv.WaitAction("Originate", 1)
	srv.Drop()
	if err := <-errc; !errors.Is(err, ami.ErrConnectionLost) {
		t.Fatalf("err = %v, want ErrConnectionLost", err)
	}
}

func TestClientNotConnected(t *testing.T) {
	c := ami.NewClient(ami.Config{Addr: "127.0.0.1:1"})
	_, err := c.Do(context.Background(), ami.NewAction("Ping"))
	if !errors.Is(err, ami.ErrNotConnected) {
		t.Fatalf("err = %v", err)
	}
}

func TestClientTimeout(t *testing.T) {
	srv := amitest.NewServer(t)
	srv.Silence("Originate")
	cfg := srv.ClientConfig()
	cfg.ActionTimeout = 50 * time.Millisecond
	c := startClient(t, cfg)
	waitConnected(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, ami.NewAction("Originate")); !ami.IsTimeout(err) {
		t.Errorf("ctx deadline: err = %v", err)
	}
	// No deadline in ctx: ActionTimeout applies.
	if _, err := c.Do(context.Background(), ami.NewAction("Originate")); !ami.IsTimeout(err) {
		t.Errorf("ActionTimeout: err = %v", err)
	}
	if !c.Connected() {
		t.Error("a timed-out action must not drop the connection")
	}
}

func TestClientPingTimeout(t *testing.T) {
	srv := amitest.NewServer(t)
	srv.Silence("Ping")
	cfg := srv.ClientConfig()
	cfg.PingInterval = 20 * time.Millisecond
	cfg.PingTimeout = 40 * time.Millisecond
	c := startClient(t, cfg)
	evs := collect(t, c, func(evs []ami.Event) bool { return count(evs, ami.LinkUp) == 2 })
	if count(evs, ami.LinkDown) != 1 {
		t.Fatalf("items: %s", summary(evs))
	}
	if st := c.Stats(); st.PingFails < 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestClientOverflow: a consumer that does not read must not block the
// reading goroutine; past MaxQueue the client drops the connection.
func TestClientOverflow(t *testing.T) {
	srv := amitest.NewServer(t)
	cfg := srv.ClientConfig()
	cfg.MaxQueue = 10
	cfg.ReconnectMin = time.Hour // stay down after the overflow
	cfg.ReconnectMax = time.Hour
	c := startClient(t, cfg)
	waitConnected(t, c)
	for i := range 100 {
		srv.Broadcast(amitest.Event("UserEvent", "N", fmt.Sprint(i)))
	}
	// Not reading: the reader must go on alone and give up the connection.
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Overflows == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	evs := collect(t, c, func(evs []ami.Event) bool { return count(evs, ami.LinkDown) == 1 })
	if n := len(evs) - 1; n != 10 {
		t.Errorf("%d messages queued, MaxQueue 10", n)
	}
	if st := c.Stats(); st.Overflows != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestClientLogoffOnCancel(t *testing.T) {
	srv := amitest.NewServer(t)
	c := ami.NewClient(srv.ClientConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitConnected(t, c)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	srv.WaitAction("Logoff", 1)
	if c.Connected() {
		t.Error("still connected")
	}
	c.Close() // idempotent after Run returned
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestClientNeverLogsSecret(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := amitest.NewServer(t)

	// A refused login is logged at Error with Asterisk's message.
	bad := srv.ClientConfig()
	bad.Secret = "wrong-" + amitest.Secret
	bad.Log = log
	c := startClient(t, bad)
	srv.Wait(func(acts []ami.Message) bool { return len(acts) >= 2 })
	if c.Connected() {
		t.Fatal("connected with a wrong secret")
	}

	good := srv.ClientConfig()
	good.Log = log
	good.PingInterval = 10 * time.Millisecond
	c = startClient(t, good)
	waitConnected(t, c)
	c.Do(context.Background(), ami.NewAction("Login", "Username", "x", "Secret", amitest.Secret))
	srv.Drop()
	collect(t, c, func(evs []ami.Event) bool { return count(evs, ami.LinkUp) == 1 })

	out := logs.String()
	if strings.Contains(out, amitest.Secret) {
		t.Fatalf("secret in logs:\n%s", out)
	}
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "Authentication failed") {
		t.Errorf("login failure not logged at error:\n%s", out)
	}
}

func TestClientRecord(t *testing.T) {
	data, err := os.ReadFile("testdata/basic_call_caller_hangup.ami")
	if err != nil {
		t.Fatal(err)
	}
	srv := amitest.NewServer(t)
	srv.Replay(data, 100)
	rec, err := ami.NewRotatingRecorder(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.ClientConfig()
	cfg.Record = rec
	c := startClient(t, cfg)
	collect(t, c, func(evs []ami.Event) bool { return len(evs) == 87 })
	rec.Close()
	got, err := os.ReadFile(rec.Name())
	if err != nil {
		t.Fatal(err)
	}
	id := srv.WaitAction("Login", 1).ActionID()
	want := bytes.Replace(data, []byte("ActionID: login-1"), []byte("ActionID: "+id), 1)
	if !bytes.Equal(got, want) {
		t.Fatalf("recording differs: got %d bytes, want %d", len(got), len(want))
	}
}
