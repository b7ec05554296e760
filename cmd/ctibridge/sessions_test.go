package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/ws"
)

// startServe runs serve with the users file and data directory given
// until the returned stop is called; it returns the API address.
func startServe(t *testing.T, users, dataDir string, extra ...string) (api string, stop func()) {
	t.Helper()
	srv := amitest.NewServer(t)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users}
	args := append([]string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dataDir}, extra...)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, &logs}) }()
	a, err := serveReady(&logs, done, 10*time.Second)
	if err != nil {
		cancel()
		t.Fatalf("%v; logs:\n%s", err, logs.String())
	}
	return a.HTTP, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// serveReady waits until serve, started on port 0 (no port found free
// and taken by another test before serve listens), has logged where it
// listens and its /readyz answers 200; or serve returned (its error, left
// in done for whoever waits on it), or the time is up.
func serveReady(logs *syncBuffer, done chan error, wait time.Duration) (bridgeAddrs, error) {
	deadline := time.Now().Add(wait)
	for {
		if a, ok := servingAddrs(logs.String()); ok {
			if resp, err := http.Get("http://" + a.Admin + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return a, nil
				}
			}
		}
		select {
		case err := <-done:
			done <- err
			return bridgeAddrs{}, fmt.Errorf("serve returned before it was ready: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return bridgeAddrs{}, fmt.Errorf("never ready in %v", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// servingAddrs reads the listeners' addresses from serve's text log line
// "ctibridge serving".
func servingAddrs(logs string) (bridgeAddrs, bool) {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="ctibridge serving"`) {
			continue
		}
		var a bridgeAddrs
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "http="); ok {
				a.HTTP = v
			} else if v, ok := strings.CutPrefix(f, "admin="); ok {
				a.Admin = v
			}
		}
		return a, a.HTTP != "" && a.Admin != ""
	}
	return bridgeAddrs{}, false
}

func postJSON(t *testing.T, url, token, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func getAuth(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeSessionsSurviveRestartAndRevocationClosesSocket: a token from
// before a restart of serve (same data directory, embedded database) still
// works after it, and so does its refresh token; an admin's revocation
// stops the REST token and closes the user's open WebSocket with 4003
// within a second.
func TestServeSessionsSurviveRestartAndRevocationClosesSocket(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h+"\"\n    endpoints: [\"201\"]\n"+
		"  - username: root\n    password_hash: \""+h+"\"\n    role: admin\n")
	dataDir := t.TempDir()

	api, stop := startServe(t, users, dataDir)
	var login struct {
		Token, RefreshToken string
	}
	if code := postJSON(t, "http://"+api+"/auth/login", "", `{"username":"alice","password":"pw"}`, &login); code != 200 || login.Token == "" {
		t.Fatalf("login: %d", code)
	}
	stop()

	api, stop = startServe(t, users, dataDir)
	defer stop()
	// Until the database has given the sessions back, an unknown token
	// gets 503 sessions_loading (retry), never 401: then 200.
	code := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code = getAuth(t, "http://"+api+"/user/me", login.Token); code != 503 {
			break
		}
	}
	if code != 200 {
		t.Fatalf("token after restart: %d, want 200", code)
	}
	var next struct{ Token string }
	if code := postJSON(t, "http://"+api+"/auth/refresh", "", `{"refreshToken":"`+login.RefreshToken+`"}`, &next); code != 200 || next.Token == "" {
		t.Fatalf("refresh after restart: %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc, err := ws.Dial(ctx, "ws://"+api+"/ws", login.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if m, err := wc.Next(ctx); err != nil || m.Op != "hello" {
		t.Fatalf("hello: %+v, %v", m, err)
	}
	var root struct{ Token string }
	postJSON(t, "http://"+api+"/auth/login", "", `{"username":"root","password":"pw"}`, &root)
	start := time.Now()
	if code := postJSON(t, "http://"+api+"/auth/sessions/revoke", root.Token, `{"username":"alice"}`, nil); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	for {
		_, err := wc.Next(ctx)
		if err == nil {
			continue
		}
		if ws.CloseCode(err) != ws.CloseTokenExpired {
			t.Fatalf("socket closed with %v, want 4003", err)
		}
		break
	}
	d := time.Since(start)
	if d > time.Second {
		t.Errorf("socket closed %v after the revocation, want within 1 s", d)
	}
	t.Logf("socket closed with 4003 %v after the revocation request was sent", d)
	for _, tok := range []string{login.Token, next.Token} {
		if code := getAuth(t, "http://"+api+"/user/me", tok); code != 401 {
			t.Errorf("revoked token: %d, want 401", code)
		}
	}
}

// TestServeTakenPort: serve on a port another process holds returns at
// once with an error that says so (errors.Is EADDRINUSE), not a bridge
// that never becomes ready.
func TestServeTakenPort(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h+"\"\n    endpoints: [\"201\"]\n")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	srv := amitest.NewServer(t)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users}
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", taken.Addr().String(), "--data-dir", t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, io.Discard})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("serve on a taken port: %v, want EADDRINUSE", err)
	}
}

// TestServeSessionsSharedByNodes: two bridges on one PostgreSQL share
// their sessions: a token issued by A works on B (REST and WebSocket) and
// its refresh token too; a logout on A makes it 401 on B and closes B's
// socket with 4003 within 1 s.
func TestServeSessionsSharedByNodes(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h+"\"\n    endpoints: [\"201\"]\n")
	dsn := dbtest.Postgres(t)
	srv := amitest.NewServer(t)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users}
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--db", dsn}
	a, b := startBusNode(t, args, env), startBusNode(t, args, env)
	apiA, apiB := a.api, b.api
	// Each has read the shared table and listens (a session issued
	// before its database was ready reaches the others once it has).
	dbtest.WaitFor(t, "both nodes listening", func() bool {
		return a.metric(t, "ctibridge_sessions_shared_listening") == "1" && b.metric(t, "ctibridge_sessions_shared_listening") == "1"
	})
	var login struct{ Token, RefreshToken string }
	if code := postJSON(t, "http://"+apiA+"/auth/login", "", `{"username":"alice","password":"pw"}`, &login); code != 200 || login.Token == "" {
		t.Fatalf("login on A: %d", code)
	}
	code := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code = getAuth(t, "http://"+apiB+"/user/me", login.Token); code != 503 {
			break
		}
	}
	if code != 200 {
		t.Fatalf("A's token on B: %d, want 200", code)
	}
	var next struct{ Token string }
	if code := postJSON(t, "http://"+apiB+"/auth/refresh", "", `{"refreshToken":"`+login.RefreshToken+`"}`, &next); code != 200 || next.Token == "" {
		t.Fatalf("A's refresh token on B: %d", code)
	}
	if code := postJSON(t, "http://"+apiA+"/auth/refresh", "", `{"refreshToken":"`+login.RefreshToken+`"}`, nil); code != 401 {
		t.Errorf("the refresh token spent on B, again on A: %d, want 401", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc, err := ws.Dial(ctx, "ws://"+apiB+"/ws", login.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if m, err := wc.Next(ctx); err != nil || m.Op != "hello" {
		t.Fatalf("hello on B: %+v, %v", m, err)
	}
	start := time.Now()
	if code := postJSON(t, "http://"+apiA+"/auth/logout", login.Token, `{}`, nil); code != 200 {
		t.Fatalf("logout on A: %d", code)
	}
	for {
		_, err := wc.Next(ctx)
		if err == nil {
			continue
		}
		if ws.CloseCode(err) != ws.CloseTokenExpired {
			t.Fatalf("B's socket closed with %v, want 4003", err)
		}
		break
	}
	d := time.Since(start)
	if d > time.Second {
		t.Errorf("B's socket closed %v after the logout on A, want within 1 s", d)
	}
	t.Logf("B's socket closed with 4003 %v after the logout on A was sent", d)
	if code := getAuth(t, "http://"+apiB+"/user/me", login.Token); code != 401 {
		t.Errorf("the token logged out on A, on B: %d, want 401", code)
	}
	if code := getAuth(t, "http://"+apiA+"/user/me", next.Token); code != 200 {
		t.Errorf("B's new token on A: %d, want 200", code)
	}
}
