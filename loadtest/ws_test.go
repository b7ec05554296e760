package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/ws"
)

// hubServer serves a real ws.Hub whose engine changes one of 50
// extensions every 5 ms until the test ends; it returns the URL and a
// token.
func hubServer(t *testing.T) (string, string) {
	t.Helper()
	hash, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{{Username: "panel", PasswordHash: string(hash), Role: auth.RoleAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(users, auth.Config{TokenTTL: time.Hour})
	tok, _, err := svc.Tokens().Issue("panel")
	if err != nil {
		t.Fatal(err)
	}
	eng := calls.New(calls.Config{})
	eng.SetLink(calls.LinkResyncing)
	eng.EndResync()
	eng.Publish()
	hub, err := ws.NewHub(eng, svc, ws.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hubDone, engDone := make(chan struct{}), make(chan struct{})
	go func() { hub.Run(ctx); close(hubDone) }()
	go func() {
		defer close(engDone)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st := []string{"INUSE", "NOT_INUSE"}[i/50%2]
			eng.Apply(ami.NewMessage([]ami.Header{{Key: "Event", Value: "DeviceStateChange"}, {Key: "Device", Value: "PJSIP/" + strconv.Itoa(1000+i%50)}, {Key: "State", Value: st}}...))
			eng.Publish()
		}
	}()
	srv := httptest.NewServer(hub)
	t.Cleanup(func() {
		hub.Close()
		cancel()
		<-hubDone
		<-engDone
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", tok
}

// wsReaders runs f with gorilla's clients and with the epoll Readers.
func wsReaders(t *testing.T, f func(t *testing.T, epoll bool)) {
	t.Run("gorilla", func(t *testing.T) { f(t, false) })
	t.Run("epoll", func(t *testing.T) { f(t, true) })
}

func TestWSAgainstHub(t *testing.T) { wsReaders(t, testWSAgainstHub) }

func testWSAgainstHub(t *testing.T, epoll bool) {
	url, tok := hubServer(t)
	start := time.Now()
	rep, err := RunWS(context.Background(), WSConfig{URL: url, Token: tok, Clients: 20, RampUp: 100, Duration: 1500 * time.Millisecond, Epoll: epoll})
	if err != nil {
		t.Fatal(err)
	}
	// Duration plus the default 2 s Grace, plus 2 s for a loaded machine.
	if el := time.Since(start); el > 1500*time.Millisecond+4*time.Second {
		t.Errorf("run took %v", el)
	}
	c := rep.Counters
	if c["clients_connected"] != 20 || c["clients_dropped"] != 0 || c["clients_failed"] != 0 || rep.ErrorCount() != 0 {
		t.Errorf("counters %v errors %v %v", c, rep.Errors, rep.FirstErrors)
	}
	if c["events"] < 20*50 || rep.Latency.Count() != c["events"] || rep.Requests != c["events"] {
		t.Errorf("%d events, %d latencies, %d messages", c["events"], rep.Latency.Count(), rep.Requests)
	}
	// The figure belongs to `ctibridge-lab loadtest ws` (docs/loadtest.md); here
	// only a delivery that has stalled fails.
	if p := rep.Latency.Quantile(0.5); p > 2*time.Second {
		t.Errorf("median change-to-client latency %v", p)
	}

	// A bad token: every client is refused at the handshake. The run ends
	// when they have all failed; Duration only bounds it, and 300 ms was
	// sometimes too short under load for a client even to be refused.
	rep, err = RunWS(context.Background(), WSConfig{URL: url, Token: "nope", Clients: 3, Duration: 3 * time.Second, Epoll: epoll})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counters["clients_failed"] != 3 || rep.Errors[ErrAuth]+rep.Errors[ErrHandshake] != 3 {
		t.Errorf("bad token: counters %v errors %v %v", rep.Counters, rep.Errors, rep.FirstErrors)
	}
}

// A server speaking garbage: non-JSON text, binary frames, a seq going
// backwards, then a close: each is counted by kind.
func TestWSBadFrames(t *testing.T) { wsReaders(t, testWSBadFrames) }

func testWSBadFrames(t *testing.T, epoll bool) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.ReadMessage() // subscribe
		for _, m := range []string{`{"op":"snapshot","seq":10}`, `not json`, `{"op":"event","seq":11,"type":"x","at":1}`, `{"op":"event","seq":9,"type":"x","at":1}`, `{"op":"event"`} {
			c.WriteMessage(websocket.TextMessage, []byte(m))
		}
		c.WriteMessage(websocket.BinaryMessage, []byte{1, 2})
		c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4008, "too slow"))
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	rep, err := RunWS(context.Background(), WSConfig{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), Clients: 2, Duration: 500 * time.Millisecond, Epoll: epoll})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{ErrNotJSON: 4, ErrBinary: 2, ErrSeqBack: 2, "ws_close_4008": 2}
	for k, v := range want {
		if rep.Errors[k] != v {
			t.Errorf("%s: %d, want %d (all: %v %v)", k, rep.Errors[k], v, rep.Errors, rep.FirstErrors)
		}
	}
	if rep.Counters["clients_dropped"] != 2 {
		t.Errorf("counters %v", rep.Counters)
	}
	if _, err := RunWS(context.Background(), WSConfig{URL: "http://x/ws"}); Kind(err) != ErrBadURL {
		t.Errorf("http URL: %v", err)
	}
}

// BenchmarkWSMessage: what either reader does with each event message of
// each client (validation one in 64, seq check, latency record).
func BenchmarkWSMessage(b *testing.B) {
	r := &wsRun{}
	w := &worker{}
	var st wsClient
	r.message(w, &st, time.Now(), []byte(`{"op":"snapshot","seq":1,"data":{}}`))
	msg := []byte(`{"op":"event","seq":12345,"type":"extenUpdate","at":1764600000000,"data":{"exten":"3001","status":"ringing","conversations":{}}}`)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		r.message(w, &st, now, msg)
	}
	if r.errs.n != nil {
		b.Fatal(r.errs.n)
	}
}

// TestWSCallbacks: each reader hands the callbacks whole messages: the
// first snapshot subscribes, an event, a later snapshot (a resync, large
// enough to arrive in several reads) redraws, and the server's close
// drops the client.
func TestWSCallbacks(t *testing.T) { wsReaders(t, testWSCallbacks) }

func testWSCallbacks(t *testing.T, epoll bool) {
	big := `{"op":"snapshot","seq":5,"extensions":{"x":"` + strings.Repeat("y", 200000) + `"}}`
	event := `{"op":"event","seq":2,"type":"extenUpdate","at":1,"data":{"exten":"3001","status":"ringing"}}`
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.ReadMessage() // subscribe
		for _, m := range []string{`{"op":"snapshot","seq":1,"extensions":{}}`, event, big} {
			c.WriteMessage(websocket.TextMessage, []byte(m))
		}
		c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4008, "too slow"))
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var got []string
	note := func(what string) {
		mu.Lock()
		got = append(got, what)
		mu.Unlock()
	}
	_, err := RunWS(context.Background(), WSConfig{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), Clients: 1, Duration: 2 * time.Second, Epoll: epoll,
		OnSubscribed: func(int) { note("subscribed") },
		OnEvent:      func(_ int, _ time.Time, raw []byte) { note("event " + fmt.Sprint(string(raw) == event)) },
		OnResync:     func(_ int, _ time.Time, raw []byte) { note("resync " + fmt.Sprint(string(raw) == big)) },
		OnDropped:    func(int) { note("dropped") }})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "subscribed|event true|resync true|dropped"; strings.Join(got, "|") != want {
		t.Errorf("callbacks %q, want %q", strings.Join(got, "|"), want)
	}
}
