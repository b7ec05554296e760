package nethcti

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
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
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/rest"
)

// The test state is a real Asterisk's (testdata/status_actions_during_call.ami,
// copied from ami/testdata): applied up to the queue caller's abandon,
// Alice 201 talks to Bob 202 (answered), and 0655501234 "Anna Bianchi"
// waits in queue support while 203 and 204 ring. One recorded
// ContactStatusDetail is applied once more with a Yealink's user agent
// for 201 (the recording's phones are SIPp, which sends none).
//
// Users (password "secret"):
//
//	alice  user      201   group sales
//	bob    user      202   group sales
//	carol  user      203   group support
//	paula  user      204   operator_panel, cellphone 3331234567
//	root   admin     -
var testHash = sync.OnceValue(func() string {
	h, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	return string(h)
})

func testUsers(t testing.TB) *auth.Users {
	t.Helper()
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", Name: "Alice Rossi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"201"}, Groups: []string{"sales"}},
		{Username: "bob", Name: "Bob Verdi", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"202"}, Groups: []string{"sales"}},
		{Username: "carol", Name: "Carol", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"203"}, Groups: []string{"support"}},
		{Username: "paula", Name: "Paula", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"204"}, Cellphone: "3331234567",
			Permissions: []string{auth.PermOperatorPanel}},
		{Username: "root", Name: "Root", PasswordHash: h, Role: auth.RoleAdmin},
	})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// recordedEngine is the engine holding the recording's state (above).
func recordedEngine(t testing.TB) *calls.Engine {
	t.Helper()
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
	for _, m := range recordedMessages(t) {
		eng.Apply(m)
	}
	eng.Publish()
	return eng
}

// recordedMessages are the recording's messages up to the abandon, and
// the Yealink item (above).
func recordedMessages(t testing.TB) []ami.Message {
	t.Helper()
	var out []ami.Message
	var detail ami.Message
	for _, m := range amitest.ReadRecording(t, "testdata/status_actions_during_call.ami") {
		if m.Get("Event") == "QueueCallerAbandon" {
			break
		}
		if m.Get("Event") == "ContactStatusDetail" && detail.Get("Event") == "" {
			detail = m
		}
		out = append(out, m)
	}
	if detail.Get("Event") == "" {
		t.Fatal("no ContactStatusDetail in the recording")
	}
	// The same item for 201, with a Yealink's user agent.
	ua := ami.NewMessage()
	for _, h := range detail.Headers() {
		switch h.Key {
		case "UserAgent":
			h.Value = "Yealink SIP-T46S 66.86.0.15"
		case "AOR", "EndpointName":
			h.Value = "201"
		case "URI":
			h.Value = "sip:201@127.0.0.1:5201"
		case "ActionID":
			continue
		}
		ua = ua.Add(h.Key, h.Value)
	}
	return append(out, ua)
}

type engineState struct{ e *calls.Engine }

func (s engineState) Snapshot() *calls.Snapshot { return s.e.Snapshot() }

// fakePhone records the action URLs pressed.
type fakePhone struct {
	mu   sync.Mutex
	urls []string
	err  error
}

func (p *fakePhone) Press(_ context.Context, u string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.urls = append(p.urls, u)
	return p.err
}

func (p *fakePhone) pressed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.urls...)
}

type fixture struct {
	t     testing.TB
	eng   *calls.Engine
	svc   *auth.Service
	ami   *amitest.Server
	front *Front
	api   http.Handler
	srv   *httptest.Server
	phone *fakePhone
	store *MemStore
	hist  history.Store // nil unless newFixture's caller set one
	book  *phonebook.Book
	// native tokens, and the compat ones once logged in
	native map[string]string
	jwt    map[string]string
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// newFixture serves the native API at / and the front at /api/ and
// /webrest/, over a fake AMI server answering Success to everything.
func newFixture(t testing.TB) *fixture { return newFixtureStores(t, nil, nil) }

// newFixtureHistory is newFixture with a call history.
func newFixtureHistory(t testing.TB, hist history.Store) *fixture {
	return newFixtureStores(t, hist, nil)
}

// newFixtureStores is newFixture with a call history and a phonebook.
func newFixtureStores(t testing.TB, hist history.Store, book *phonebook.Book) *fixture {
	t.Helper()
	f := &fixture{t: t, native: map[string]string{}, jwt: map[string]string{}, phone: &fakePhone{}, store: NewMemStore(),
		hist: hist, book: book}
	f.eng = recordedEngine(t)
	f.svc = auth.NewService(testUsers(t), auth.Config{})
	f.ami = amitest.NewServer(t)
	for _, name := range []string{"Originate", "Hangup", "Redirect", "Atxfer", "Park", "MixMonitor", "StopMixMonitor",
		"MixMonitorMute", "DBPut", "DBDel", "Setvar", "QueueRemove", "QueuePause", "PlayDTMF", "MuteAudio"} {
		f.ami.Handle(name, func(context.Context, *ami.Session, ami.Message) []ami.Message {
			return []ami.Message{amitest.Response("Success", "Message", "ok")}
		})
	}
	// A QueueAdd makes the PBX report the member (the recorded
	// QueueMemberAdded of 201 to support).
	var added ami.Message
	for _, m := range amitest.ReadRecording(t, "testdata/queue_dynamic_members.ami") {
		if m.Get("Event") == "QueueMemberAdded" {
			added = m
			break
		}
	}
	var engMu sync.Mutex
	f.ami.Handle("QueueAdd", func(context.Context, *ami.Session, ami.Message) []ami.Message {
		engMu.Lock()
		f.eng.Apply(added)
		f.eng.Publish()
		engMu.Unlock()
		return []ami.Message{amitest.Response("Success", "Message", "ok")}
	})
	c := ami.NewClient(f.ami.ClientConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(5 * time.Second)
	for !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("ami client did not connect")
		}
		time.Sleep(time.Millisecond)
	}
	rcfg := rest.Config{Auth: f.svc, State: engineState{f.eng}, PBX: c, AccessLogEvery: -1,
		History: f.hist, HistoryLocation: time.UTC}
	if f.book != nil {
		rcfg.Phonebook = f.book // never a nil pointer in the interface
	}
	api, err := rest.NewHandler(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	f.api = api
	cfg := Config{Auth: f.svc, API: api, State: engineState{f.eng}, PBX: c, Secret: testSecret,
		Store: f.store, Phone: f.phone}
	if f.book != nil {
		cfg.Phonebook = f.book
	}
	f.front, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.front.loadTokens(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", f.front)
	mux.Handle("/webrest/", f.front)
	mux.Handle("/", api)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	for _, u := range []string{"alice", "bob", "carol", "paula", "root"} {
		tok, _, err := f.svc.Tokens().Issue(u)
		if err != nil {
			t.Fatal(err)
		}
		f.native[u] = tok
	}
	return f
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorCode() string {
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r response) json(t testing.TB) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

// do sends a request with headers as key, value pairs.
func (f *fixture) do(method, path, body string, hdr ...string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// login logs user in through POST /api/login and keeps its JWT.
func (f *fixture) login(user string) string {
	f.t.Helper()
	if tok, ok := f.jwt[user]; ok {
		return tok
	}
	r := f.do("POST", "/api/login", `{"username":"`+user+`","password":"secret"}`)
	if r.status != http.StatusOK {
		f.t.Fatalf("login %s: %d %s", user, r.status, r.body)
	}
	var v struct{ Token string }
	json.Unmarshal(r.body, &v)
	f.jwt[user] = v.Token
	return v.Token
}

// api sends a request to /api as user (its JWT).
func (f *fixture) apiDo(method, path, user, body string) response {
	f.t.Helper()
	return f.do(method, "/api"+path, body, "Authorization", "Bearer "+f.login(user))
}

// nativeDo sends a request to the native API as user.
func (f *fixture) nativeDo(method, path, user, body string) response {
	f.t.Helper()
	return f.do(method, path, body, "Authorization", "Bearer "+f.native[user])
}

// sent returns the actions the fake PBX received since the last call,
// without Login, Ping and Logoff, each as "Key: Value" lines without
// ActionID.
func (f *fixture) sent() []string {
	var out []string
	for _, m := range f.ami.Actions() {
		if a := m.Action(); a == "Login" || a == "Ping" || a == "Logoff" {
			continue
		}
		var b strings.Builder
		for _, h := range m.Headers() {
			if !strings.EqualFold(h.Key, "ActionID") {
				b.WriteString(h.Key + ": " + h.Value + "\n")
			}
		}
		out = append(out, b.String())
	}
	return out
}
