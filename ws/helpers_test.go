package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
// alice's group; paula a user with operator_panel; dave a user owning 204;
// root an admin.
func testUsers(t testing.TB) *auth.Users {
	t.Helper()
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", Name: "Alice Rossi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"201"}, Groups: []string{"reception"}},
		{Username: "bob", Name: "Bob Verdi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"202"}},
		{Username: "olga", PasswordHash: h, Role: auth.RoleOperator, Endpoints: []string{"203"}, Groups: []string{"reception"}},
		{Username: "dave", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"204"}},
		{Username: "paula", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"205"}, Permissions: []string{auth.PermOperatorPanel}},
		{Username: "root", PasswordHash: h, Role: auth.RoleAdmin},
	})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// env is an engine, an auth service and a hub served over loopback. The
// engine belongs to the test goroutine (apply, publish).
type env struct {
	t    testing.TB
	eng  *calls.Engine
	auth *auth.Service
	hub  *Hub
	srv  *httptest.Server
	url  string

	markerBusy bool
}

func newEnv(t testing.TB, ccfg calls.Config, acfg auth.Config, hcfg Config) *env {
	t.Helper()
	return newEnvState(t, ccfg, acfg, hcfg, nil)
}

// newEnvState is newEnv with the hub reading state(engine) when state is
// not nil.
func newEnvState(t testing.TB, ccfg calls.Config, acfg auth.Config, hcfg Config, state func(*calls.Engine) State) *env {
	t.Helper()
	if ccfg.Trunks == nil {
		ccfg.Trunks = []string{"trunk"}
	}
	if ccfg.Opaque == nil {
		ccfg.Opaque = auth.Opaquer{}
	}
	eng := calls.New(ccfg)
	eng.Publish() // the configured trunks appear: later publishes hold only what a test does
	svc := auth.NewService(testUsers(t), acfg)
	var st State = eng
	if state != nil {
		st = state(eng)
	}
	h, err := NewHub(st, svc, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		cancel()
		<-done
		h.Close()
		srv.Close()
	})
	return &env{t: t, eng: eng, auth: svc, hub: h, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

func (e *env) token(user string) string {
	e.t.Helper()
	tok, _, err := e.auth.Tokens().Issue(user)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *env) dial(user string) *Client {
	e.t.Helper()
	c, err := Dial(context.Background(), e.url, e.token(user))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
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

// apply applies messages and publishes once.
func (e *env) apply(ms ...ami.Message) *calls.Snapshot {
	for _, m := range ms {
		e.eng.Apply(m)
	}
	return e.eng.Publish()
}

// loadRecording reads ../ami/testdata/<name>.ami.
func loadRecording(t testing.TB, name string) []ami.Message {
	t.Helper()
	return amitest.ReadRecording(t, "../ami/testdata/"+name+".ami")
}

// next reads one message or fails the test after a timeout.
func next(t testing.TB, c *Client) Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return m
}

// expectOp reads one message and checks its op.
func expectOp(t testing.TB, c *Client, op string) Message {
	t.Helper()
	m := next(t, c)
	if m.Op != op {
		t.Fatalf("got op %q, want %q (%+v)", m.Op, op, m)
	}
	return m
}

// expectClose reads until the connection ends and checks the close code.
func expectClose(t testing.TB, c *Client, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := c.Next(ctx)
		if err != nil {
			if got := CloseCode(err); got != code {
				t.Fatalf("connection ended with %v (code %d), want code %d", err, got, code)
			}
			return
		}
	}
}

// mirror is a client's copy of the state, built from what it receives as
// docs/websocket.md tells a client to.
type mirror struct {
	seq, version uint64
	epoch        string
	stale        bool
	colls        map[string]map[string]string // topic -> key -> compact JSON
	ringing      []string                     // extenRinging data
	seqs         []uint64                     // event seqs in arrival order
}

var keyField = map[string][2]string{
	"extenUpdate": {"extensions", "exten"}, "queueUpdate": {"queues", "queue"},
	"parkingUpdate": {"parkings", "parking"}, "trunkUpdate": {"trunks", "name"},
}

func compact(t testing.TB, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("bad JSON %q: %v", raw, err)
	}
	return b.String()
}

func collection(t testing.TB, raw []byte) map[string]string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("bad collection %q: %v", raw, err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = compact(t, v)
	}
	return out
}

func (m *mirror) apply(t testing.TB, msg Message) {
	t.Helper()
	switch msg.Op {
	case "hello":
		m.epoch = msg.Epoch
	case "snapshot":
		m.seq, m.version, m.stale, m.epoch = msg.Seq, msg.Version, msg.Stale, msg.Epoch
		m.colls = map[string]map[string]string{}
		for name, raw := range map[string]json.RawMessage{"extensions": msg.Extensions, "queues": msg.Queues, "parkings": msg.Parkings, "trunks": msg.Trunks} {
			if raw != nil {
				m.colls[name] = collection(t, raw)
			}
		}
	case "resumed":
		if msg.Since != m.seq {
			t.Fatalf("resumed after %d, mirror is at %d", msg.Since, m.seq)
		}
	case "event":
		if msg.Seq < m.seq || msg.Seq == m.seq && msg.Type != "pbxStatus" {
			// A pbxStatus out of the feed (status deltas) repeats it.
			t.Fatalf("event %s seq %d after %d: seq must grow", msg.Type, msg.Seq, m.seq)
		}
		m.seq = msg.Seq
		m.seqs = append(m.seqs, msg.Seq)
		if kf, ok := keyField[msg.Type]; ok {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(msg.Data, &obj); err != nil {
				t.Fatal(err)
			}
			var key string
			json.Unmarshal(obj[kf[1]], &key)
			if m.colls[kf[0]] == nil {
				m.colls[kf[0]] = map[string]string{}
			}
			m.colls[kf[0]][key] = compact(t, msg.Data)
		}
		if _, ok := deltaOfType[msg.Type]; ok {
			m.delta(t, msg.Type, msg.Data)
		}
		if msg.Type == "extenRinging" {
			m.ringing = append(m.ringing, string(msg.Data))
		}
		if msg.Type == "pbxStatus" {
			var st struct{ PBX string }
			json.Unmarshal(msg.Data, &st)
			m.stale = st.PBX != "live"
		}
	}
}

// deltaOfType names what a delta event changes: its collection, the field
// of its key and the field of what "set" and "removed" change.
var deltaOfType = map[string][3]string{
	calls.TrunkConversations.String(): {"trunks", "name", "conversations"},
	calls.QueueMembers.String():       {"queues", "queue", "members"},
}

// delta applies a trunkConversations or queueMembers event as
// docs/websocket.md tells a client to: the entity's fields replaced, the
// items in "set" put under their keys (conversations, members), those in
// "removed" deleted.
func (m *mirror) delta(t testing.TB, typ string, data []byte) {
	t.Helper()
	of := deltaOfType[typ]
	var d struct {
		Set     map[string]json.RawMessage `json:"set"`
		Removed []string                   `json:"removed"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &d); err != nil || json.Unmarshal(data, &fields) != nil {
		t.Fatalf("%s %s: %v", typ, data, err)
	}
	var key string
	json.Unmarshal(fields[of[1]], &key)
	if m.colls[of[0]] == nil {
		m.colls[of[0]] = map[string]string{}
	}
	x := map[string]json.RawMessage{}
	items := map[string]json.RawMessage{}
	if old, ok := m.colls[of[0]][key]; ok {
		json.Unmarshal([]byte(old), &x)
		json.Unmarshal(x[of[2]], &items)
	}
	for k, v := range fields {
		if k != "set" && k != "removed" {
			x[k] = v
		}
	}
	for id, it := range d.Set {
		items[id] = it
	}
	for _, id := range d.Removed {
		if _, ok := items[id]; !ok {
			t.Fatalf("%s removes %s, which %s does not hold", typ, id, key)
		}
		delete(items, id)
	}
	x[of[2]], _ = json.Marshal(items)
	b, _ := json.Marshal(x)
	m.colls[of[0]][key] = string(b)
}

// normTrunk is a trunk's JSON with its keys sorted and without its
// conversations' durations: a conversation a client got in a delta keeps
// the duration it was sent with.
func normTrunk(t testing.TB, s string) string {
	t.Helper()
	var tr map[string]any
	if err := json.Unmarshal([]byte(s), &tr); err != nil {
		t.Fatalf("trunk %s: %v", s, err)
	}
	convs, _ := tr["conversations"].(map[string]any)
	for _, cv := range convs {
		delete(cv.(map[string]any), "duration")
	}
	b, _ := json.Marshal(tr)
	return string(b)
}

// readUntil applies messages until the mirror has reached seq.
func (m *mirror) readUntil(t testing.TB, c *Client, seq uint64) {
	t.Helper()
	for m.seq < seq || m.colls == nil {
		m.apply(t, next(t, c))
	}
}
