//go:build unix

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
)

// TestServeNotifyAndReload: under systemd (NOTIFY_SOCKET) serve says
// READY=1 once resynchronised; SIGHUP reloads the users file and the log
// level (RELOADING=1, then READY=1) without dropping a connection; a broken
// users file is refused and the running users stay.
func TestServeNotifyAndReload(t *testing.T) {
	srv := amitest.NewServer(t)
	sock := filepath.Join(t.TempDir(), "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	h1, _ := auth.HashPassword("a", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h1+"\"\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users, "NOTIFY_SOCKET": sock}
	// Serve listens on port 0 (a port found free beforehand could be taken
	// by another test process before serve listens on it) and says where
	// in its "ctibridge serving" line, logged before it runs the bridge
	// and so before READY=1.
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", t.TempDir()}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, &logs}) }()
	defer func() { cancel(); <-done }()

	if got := next(); !strings.HasPrefix(got, "STATUS=connecting") {
		t.Fatalf("first: %q", got)
	}
	if got := next(); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("want READY=1, got %q", got)
	}
	// Read at once, not waited for as serveReady would: /readyz must
	// answer 200 as soon as serve says READY=1.
	addrs, ok := servingAddrs(logs.String())
	if !ok {
		t.Fatalf("READY=1 before serve logged where it listens; logs:\n%s", logs.String())
	}
	admin, api := addrs.Admin, addrs.HTTP
	if code, _ := get(t, "http://"+admin+"/readyz"); code != 200 {
		t.Fatalf("READY=1 before /readyz: %d", code)
	}
	login := func(user, pw string) int {
		resp, err := http.Post("http://"+api+"/auth/login", "application/json", strings.NewReader(`{"username":"`+user+`","password":"`+pw+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if login("bob", "b") != 401 {
		t.Fatal("bob before reload")
	}
	keep, err := net.Dial("tcp", api) // an open connection must survive
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()

	h2, _ := auth.HashPassword("b", 4)
	os.WriteFile(users, []byte("users:\n  - username: bob\n    password_hash: \""+h2+"\"\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	if got := next(); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("want RELOADING=1, got %q", got)
	}
	if got := next(); !strings.HasPrefix(got, "READY=1") {
		t.Fatalf("want READY=1 after the reload, got %q", got)
	}
	if login("bob", "b") != 200 || login("alice", "a") != 401 {
		t.Errorf("users not reloaded; logs:\n%s", logs.String())
	}
	keep.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	keep.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 64)
	if n, err := keep.Read(b); err != nil || !strings.HasPrefix(string(b[:n]), "HTTP/1.1 ") {
		t.Errorf("connection open before the reload: %q %v", b[:n], err)
	}

	os.WriteFile(users, []byte("users:\n  - username: bob\n    role: boss\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	next()
	next()
	if login("bob", "b") != 200 {
		t.Error("a broken users file replaced the running users")
	}
	if !strings.Contains(logs.String(), "reload failed") {
		t.Errorf("no reload failure logged:\n%s", logs.String())
	}
}
