package rest

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
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// The test PBX (resttest, 10 extensions, 6 in calls):
//
//	2000 <-> 2001, 2002 <-> 2003, 2004 <-> 2005 talking; 2006..2009 idle.
//	queues 401 and 402 with members 2000..2003; a caller waits in 401.
//	parking 701 holds a caller parked by 2000; trunk provider1.
//
// Users (password "secret"):
//
//	alice  user      2000      group reception
//	bob    user      2001      group sales
//	paula  user      2006      operator_panel
//	olga   operator  2009      group reception (so she acts on 2000 and 2009)
//	root   admin     -
var testHash = sync.OnceValue(func() string {
	h, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	return string(h)
})

func testUsers(t testing.TB) *auth.Users {
	t.Helper()
	h := testHash()
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", Name: "Alice", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"2000"}, Groups: []string{"reception"}},
		{Username: "bob", Name: "Bob", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"2001"}, Groups: []string{"sales"}},
		{Username: "paula", Name: "Paula", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"2006"}, Permissions: []string{auth.PermOperatorPanel}},
		{Username: "olga", Name: "Olga", PasswordHash: h, Role: auth.RoleOperator, Endpoints: []string{"2009"}, Groups: []string{"reception"}},
		{Username: "root", Name: "Root", PasswordHash: h, Role: auth.RoleAdmin},
	})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// engineState lets a test swap the engine's published snapshot.
type engineState struct{ e *calls.Engine }

func (s engineState) Snapshot() *calls.Snapshot { return s.e.Snapshot() }

type fixture struct {
	t      testing.TB
	h      *handler
	srv    *httptest.Server
	eng    *calls.Engine
	ami    *amitest.Server
	svc    *auth.Service
	tokens map[string]string
	m      *Metrics
}

// newFixture starts the handler on httptest with a connected AMI client.
// pbx=false leaves the PBX out (reads only).
func newFixture(t testing.TB, pbx bool, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, tokens: map[string]string{}}
	f.eng = resttest.Engine(resttest.Options{Extensions: 10, InCall: 6})
	f.svc = auth.NewService(testUsers(t), auth.Config{})
	f.m = NewMetrics()
	cfg := Config{Auth: f.svc, State: engineState{f.eng}, Metrics: f.m, AccessLogEvery: -1,
		Now: func() time.Time { return time.Date(2026, 3, 4, 10, 11, 12, 0, time.UTC) }}
	if pbx {
		f.ami = amitest.NewServer(t)
		for _, name := range []string{"Originate", "Hangup", "Redirect", "Atxfer", "Park", "MixMonitor", "StopMixMonitor",
			"MixMonitorMute", "DBPut", "DBDel", "Setvar", "QueueAdd", "QueueRemove", "QueuePause"} {
			f.ami.Handle(name, func(context.Context, *ami.Session, ami.Message) []ami.Message {
				return []ami.Message{amitest.Response("Success", "Message", "ok")}
			})
		}
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
		cfg.PBX = c
	}
	if mod != nil {
		mod(&cfg)
	}
	f.svc = cfg.Auth
	for _, u := range []string{"alice", "bob", "paula", "olga", "root"} {
		tok, _, err := f.svc.Tokens().Issue(u)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[u] = tok
	}
	h, err := newHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
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

// do sends a request as user ("" for none) with optional extra headers as
// key, value pairs.
func (f *fixture) do(method, path, user, body string, hdr ...string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+f.tokens[user])
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

// sent returns the actions the fake PBX received, Login excluded.
func (f *fixture) sent() []ami.Message {
	var out []ami.Message
	for _, m := range f.ami.Actions() {
		if a := m.Action(); a != "Login" && a != "Ping" && a != "Logoff" {
			out = append(out, m)
		}
	}
	return out
}

// headers renders an action without its ActionID, one "Key: Value" per
// line, for exact comparisons.
func headers(m ami.Message) string {
	var b strings.Builder
	for _, h := range m.Headers() {
		if strings.EqualFold(h.Key, "ActionID") {
			continue
		}
		b.WriteString(h.Key + ": " + h.Value + "\n")
	}
	return b.String()
}
