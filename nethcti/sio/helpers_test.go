package sio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

var testHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
})

// testUsers: alice and bob are plain users; olga an operator sharing
// alice's group; paula a user with operator_panel; dave a user owning 204
// with a cellphone; root an admin.
func testUsers(t testing.TB) *auth.Users {
	t.Helper()
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", Name: "Alice Rossi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"201"}, Groups: []string{"reception"}},
		{Username: "bob", Name: "Bob Verdi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"202"}},
		{Username: "olga", PasswordHash: h, Role: auth.RoleOperator, Endpoints: []string{"203"}, Groups: []string{"reception"}},
		{Username: "dave", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"204"}, Cellphone: "3331234567"},
		{Username: "paula", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"205"}, Permissions: []string{auth.PermOperatorPanel}},
		{Username: "root", PasswordHash: h, Role: auth.RoleAdmin},
	})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// env is an engine, an auth service and a Server served over loopback at
// both Paths. The engine belongs to the test goroutine (apply).
type env struct {
	t    testing.TB
	eng  *calls.Engine
	auth *auth.Service
	srv  *Server
	http *httptest.Server
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
	eng.Publish()
	svc := auth.NewService(testUsers(t), auth.Config{})
	if cfg.TakeOverWait == 0 {
		cfg.TakeOverWait = 2 * time.Second
	}
	s, err := New(eng, NativeLogin{svc}, UsersDirectory(svc.Users), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range Paths {
		mux.Handle(p, s)
	}
	hs := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
		hs.Close()
	})
	return &env{t: t, eng: eng, auth: svc, srv: s, http: hs}
}

func (e *env) token(user string) string {
	e.t.Helper()
	tok, _, err := e.auth.Tokens().Issue(user)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// apply applies messages and publishes once.
func (e *env) apply(ms ...ami.Message) {
	for _, m := range ms {
		e.eng.Apply(m)
	}
	e.eng.Publish()
}

// event is a synthetic AMI event.
func event(name string, kv ...string) ami.Message {
	m := ami.NewMessage([]ami.Header{{Key: "Event", Value: name}}...)
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

// devState changes an extension's device state: one extenUpdate.
func devState(exten string, busy bool) ami.Message {
	st := "NOT_INUSE"
	if busy {
		st = "INUSE"
	}
	return event("DeviceStateChange", "Device", "PJSIP/"+exten, "State", st)
}

// loadRecording reads the AMI recording ../../ami/testdata/<name>.ami.
func loadRecording(t testing.TB, name string) []ami.Message {
	t.Helper()
	return amitest.ReadRecording(t, "../../ami/testdata/"+name+".ami")
}

// sioEvent is one socket.io event a test client received: an event, an
// ack ("ack"), or the server's disconnect ("disconnect").
type sioEvent struct {
	Name string
	Data json.RawMessage
}

// rawClient speaks engine.io 4 / socket.io 5 over a websocket itself, as
// little as the tests need: it answers pings, reads events and acks.
type rawClient struct {
	t      testing.TB
	conn   *websocket.Conn
	wmu    sync.Mutex
	events chan sioEvent
}

// dialRaw opens a socket.io connection at path (one of Paths, without
// its trailing slash, as the clients give it) and joins the namespace.
func (e *env) dialRaw(path string) *rawClient {
	e.t.Helper()
	u := "ws" + strings.TrimPrefix(e.http.URL, "http") + path + "/?EIO=4&transport=websocket"
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		e.t.Fatalf("dial %s: %v", u, err)
	}
	c := &rawClient{t: e.t, conn: conn, events: make(chan sioEvent, 4096)}
	e.t.Cleanup(func() { conn.Close() })
	_, open, err := conn.ReadMessage()
	if err != nil || len(open) == 0 || open[0] != '0' {
		e.t.Fatalf("engine.io open: %q %v", open, err)
	}
	c.send("40")
	_, joined, err := conn.ReadMessage()
	if err != nil || !strings.HasPrefix(string(joined), "40") {
		e.t.Fatalf("socket.io connect: %q %v", joined, err)
	}
	go c.read()
	return c
}

func (c *rawClient) send(s string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.WriteMessage(websocket.TextMessage, []byte(s))
}

func (c *rawClient) read() {
	defer close(c.events)
	for {
		_, m, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		s := string(m)
		switch {
		case s == "2":
			c.send("3")
		case strings.HasPrefix(s, "42["):
			var arr []json.RawMessage
			if err := json.Unmarshal(m[2:], &arr); err != nil || len(arr) == 0 {
				continue
			}
			ev := sioEvent{}
			json.Unmarshal(arr[0], &ev.Name)
			if len(arr) > 1 {
				ev.Data = arr[1]
			}
			c.events <- ev
		case strings.HasPrefix(s, "43"):
			c.events <- sioEvent{Name: "ack", Data: json.RawMessage(strings.TrimLeft(s[2:], "0123456789"))}
		case s == "41":
			c.events <- sioEvent{Name: "disconnect"}
		}
	}
}

// emit sends event name with data (JSON; "" for none).
func (c *rawClient) emit(name, data string) {
	if data == "" {
		c.send(fmt.Sprintf(`42[%q]`, name))
		return
	}
	c.send(fmt.Sprintf(`42[%q,%s]`, name, data))
}

func (c *rawClient) login(user, token, ua string) {
	b, _ := json.Marshal(map[string]string{"accessKeyId": user, "token": token, "uaType": ua})
	c.emit("login", string(b))
}

// expect returns the next event named name, skipping others; it fails
// the test when none comes within 10 s.
func (c *rawClient) expect(name string) sioEvent {
	c.t.Helper()
	return expectEvent(c.t, c.events, name)
}

// expectEvent returns the next event on events named name, skipping
// others; it fails t when the channel closes or none comes within 10 s.
func expectEvent(t testing.TB, events <-chan sioEvent, name string) sioEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the client ended waiting for %s", name)
			}
			if ev.Name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s in 10 s", name)
		}
	}
}

// quiet checks that no event named name comes within d.
func (c *rawClient) quiet(name string, d time.Duration) {
	c.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return
			}
			if ev.Name == name {
				c.t.Fatalf("unexpected %s: %s", name, ev.Data)
			}
		case <-timeout:
			return
		}
	}
}
