package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/ws"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
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

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServe runs `ctibridge serve` against a fake Asterisk: it becomes ready
// once logged in and resynchronised, exposes metrics, records the AMI stream
// without the secret, and stops cleanly, logging off.
func TestServe(t *testing.T) {
	srv := amitest.NewServer(t)
	srv.Expect("Originate", "Channel", "PJSIP/201", "Exten", "202", "Context", "from-internal").
		Reply(amitest.Response("Success", "Message", "Originate successfully queued"))
	srv.Handle("ExtensionStateList", func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		out := []ami.Message{amitest.Response("Success", "EventList", "start")}
		for _, x := range []string{"201", "202"} {
			out = append(out, amitest.Event("ExtensionStatus", "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", "0", "StatusText", "Idle"))
		}
		return append(out, amitest.Event("ExtensionStateListComplete", "EventList", "Complete", "ListItems", "2"))
	})
	// A remote NethCTI-style phonebook: serve forwards searches to it with
	// the credentials and the user's name.
	var remoteAuth, remoteUser atomic.Value
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remoteAuth.Store(r.Header.Get("Authorization"))
		remoteUser.Store(r.Header.Get("X-CTI-User"))
		switch r.URL.Path {
		case "/phonebook/search/rossi":
			io.WriteString(w, `{"count":1,"rows":[{"id":7,"owner_id":"","type":"public","name":"Mario Rossi","workphone":"0721405516"}]}`)
		case "/customercard/0721405516":
			io.WriteString(w, `<h1>Mario Rossi</h1>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer remote.Close()
	recDir := t.TempDir()
	hash, err := auth.HashPassword("alice-pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    name: Alice\n    password_hash: \""+hash+"\"\n    endpoints: [\"201\"]\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users}
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", "127.0.0.1:0", "--record-ami", recDir, "--data-dir", t.TempDir(),
		"--phonebook-url", remote.URL, "--customer-card-url", remote.URL, "--upstream-token", "pb-token"}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, &logs}) }()

	addrs, err := serveReady(&logs, done, 10*time.Second)
	if err != nil {
		cancel()
		t.Fatalf("%v; logs:\n%s", err, logs.String())
	}
	admin, api := addrs.Admin, addrs.HTTP
	if code, _ := get(t, "http://"+admin+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz = %d", code)
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{"ctibridge_ami_connected 1", "ctibridge_ready 1", "ctibridge_resyncs_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The REST API: log in, read, act; the action reaches the PBX.
	resp, err := http.Post("http://"+api+"/auth/login", "application/json", strings.NewReader(`{"username":"alice","password":"alice-pw"}`))
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || login.Token == "" {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	do := func(method, path, body string) int {
		req, _ := http.NewRequest(method, "http://"+api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+login.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("GET", "/astproxy/extensions", ""); code != http.StatusOK {
		t.Errorf("GET extensions = %d", code)
	}
	if code := do("POST", "/astproxy/call", `{"number":"202","endpointId":"201"}`); code != http.StatusOK {
		t.Errorf("POST call = %d", code)
	}
	if code := do("POST", "/astproxy/call", `{"number":"202","endpointId":"203"}`); code != http.StatusForbidden {
		t.Errorf("POST call for another's phone = %d, want 403", code)
	}
	srv.WaitAction("Originate", 1)
	if code := do("GET", "/phonebook/search/rossi", ""); code != http.StatusOK {
		t.Errorf("GET phonebook search through the remote = %d", code)
	}
	if code := do("GET", "/customercard/0721405516", ""); code != http.StatusOK {
		t.Errorf("GET customer card through the remote = %d", code)
	}
	if a, u := remoteAuth.Load(), remoteUser.Load(); a != "Bearer pb-token" || u != "alice" {
		t.Errorf("remote phonebook saw Authorization %q and user %q", a, u)
	}

	// The WebSocket stream on the same listener: hello, then a snapshot
	// holding the extensions the PBX listed; on shutdown, going away.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	wc, err := ws.Dial(wctx, "ws://"+api+"/ws", login.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if m, err := wc.Next(wctx); err != nil || m.Op != "hello" {
		t.Fatalf("first message %+v, %v; want hello", m, err)
	}
	if err := wc.Subscribe("extensions"); err != nil {
		t.Fatal(err)
	}
	snap, err := wc.Next(wctx)
	if err != nil || snap.Op != "snapshot" || !strings.Contains(string(snap.Extensions), `"201"`) {
		t.Fatalf("snapshot %+v, %v", snap, err)
	}

	checkOriginAndHeaders(t, wctx, api, login.Token)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := wc.Next(wctx); ws.CloseCode(err) != ws.CloseGoingAway {
		t.Errorf("WebSocket after shutdown: %v, want going away (1001)", err)
	}
	if len(srv.Wait(func(ms []ami.Message) bool {
		for _, m := range ms {
			if m.Action() == "Logoff" {
				return true
			}
		}
		return false
	})) == 0 {
		t.Error("no Logoff on shutdown")
	}
	if strings.Contains(logs.String(), amitest.Secret) {
		t.Error("the AMI secret appears in the logs")
	}
	files, _ := filepath.Glob(filepath.Join(recDir, "*.ami"))
	if len(files) == 0 {
		t.Fatal("no AMI recording written")
	}
	var all []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	if !bytes.Contains(all, []byte("Asterisk Call Manager")) || !bytes.Contains(all, []byte("Event: FullyBooted")) {
		t.Errorf("recording lacks the stream:\n%.400s", all)
	}
	if bytes.Contains(all, []byte(amitest.Secret)) {
		t.Error("the secret is in the recording")
	}
}

func TestServeNeedsCredentials(t *testing.T) {
	// Port 0: serve refuses the configuration before it listens; were that
	// broken, it would listen on a port of its own, not one found free that
	// another test process may have taken since.
	err := run(context.Background(), []string{"serve", "--admin", "127.0.0.1:0", "--data-dir", t.TempDir()}, sysIO{func(string) string { return "" }, nil, io.Discard, io.Discard})
	if err == nil || !strings.Contains(err.Error(), "--ami-user") {
		t.Fatalf("err = %v", err)
	}
}

// checkOriginAndHeaders: a page of another site cannot open the stream
// (403 at the upgrade) while the panel's own origin can; the API and the
// panel answer with the security headers (no HSTS over plain HTTP).
func checkOriginAndHeaders(t *testing.T, ctx context.Context, api, token string) {
	t.Helper()
	hdr := func(origin string) http.Header {
		return http.Header{"Origin": {origin}, "Authorization": {"Bearer " + token}}
	}
	if c, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+api+"/ws", hdr("https://evil.example")); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		if c != nil {
			c.Close()
		}
		t.Errorf("WebSocket from a foreign origin: %v, %v; want 403", resp, err)
	}
	c, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+api+"/ws", hdr("http://"+api))
	if err != nil {
		t.Errorf("WebSocket from the same origin: %v", err)
	} else {
		c.Close()
	}
	// JSON carries no document policy (nothing renders it); the panel its own.
	for path, csp := range map[string]string{"/astproxy/extensions": "", "/": "script-src 'self'"} {
		resp, err := http.Get("http://" + api + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("Content-Security-Policy")
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || (csp == "" && got != "") || !strings.Contains(got, csp) ||
			resp.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET %s headers: %v", path, resp.Header)
		}
	}
}
