package main

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/nethcti/sio"
)

// sioDial opens NethCTI's socket.io at /api/ws of api as phone-island
// does (engine.io 4, the websocket transport), and joins the default
// namespace.
func sioDial(t *testing.T, api string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+api+"/api/ws/?EIO=4&transport=websocket", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, m, err := c.ReadMessage(); err != nil || !strings.HasPrefix(string(m), "0{") {
		t.Fatalf("engine.io open: %q %v", m, err)
	}
	c.WriteMessage(websocket.TextMessage, []byte("40"))
	if _, m, err := c.ReadMessage(); err != nil || !strings.HasPrefix(string(m), "40") {
		t.Fatalf("namespace: %q %v", m, err)
	}
	return c
}

// sioNext returns the next socket.io message of c that is not an
// engine.io ping (answered), or the error that ended the connection.
func sioNext(c *websocket.Conn) (string, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			return "", err
		}
		if string(m) == "2" {
			c.WriteMessage(websocket.TextMessage, []byte("3"))
			continue
		}
		return string(m), nil
	}
}

// sioLogin sends NethCTI's login (no uaType: no takeOver between the
// test's clients) and returns the answer's event: authe_ok or 401.
func sioLogin(t *testing.T, c *websocket.Conn, user, token string) string {
	t.Helper()
	c.WriteMessage(websocket.TextMessage, []byte(`42["login",{"accessKeyId":"`+user+`","token":"`+token+`"}]`))
	for {
		m, err := sioNext(c)
		if err != nil {
			t.Fatalf("login of %s: %v", user, err)
		}
		if ev, ok := strings.CutPrefix(m, `42["`); ok {
			ev, _, _ = strings.Cut(ev, `"`)
			return ev
		}
	}
}

// sioEnded reads c until the server disconnects it (socket.io's
// disconnect packet, 41, or the connection closed) and says whether it
// was told 401 first.
func sioEnded(t *testing.T, c *websocket.Conn) bool {
	t.Helper()
	told := false
	for {
		m, err := sioNext(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("still connected: %v", err)
		}
		if err != nil || m == "41" {
			return told
		}
		if strings.HasPrefix(m, `42["401"`) {
			told = true
		}
	}
}

// TestNethCTISocketLogins: with --nethcti, the socket takes the REST
// front's credentials: the JWT of POST /api/login, NethLink's legacy
// user:token and a persistent phone-island token (and ctibridge's own);
// a JWT is refused for another user. A logout, and an admin's revocation
// of the user's sessions, disconnect the sockets those sessions back,
// with a 401 first; the persistent token's socket stays. Without
// --nethcti there is no socket.io.
func TestNethCTISocketLogins(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h+"\"\n    endpoints: [\"201\"]\n"+
		"  - username: root\n    password_hash: \""+h+"\"\n    role: admin\n")
	api, stopServe := startServe(t, users, t.TempDir(), "--nethcti=true")
	stop := sync.OnceFunc(stopServe)
	defer stop()
	base := "http://" + api

	var jwt struct{ Token string }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code := postJSON(t, base+"/api/login", "", `{"username":"alice","password":"pw"}`, &jwt); code == 200 || time.Now().After(deadline) {
			break
		}
	}
	if strings.Count(jwt.Token, ".") != 2 {
		t.Fatalf("POST /api/login: %q", jwt.Token)
	}
	jc := sioDial(t, api)
	if ev := sioLogin(t, jc, "alice", jwt.Token); ev != "authe_ok" {
		t.Fatalf("JWT login: %s", ev)
	}
	if ev := sioLogin(t, sioDial(t, api), "root", jwt.Token); ev != "401" {
		t.Errorf("alice's JWT as root: %s, want 401", ev)
	}

	resp, err := http.Post(base+"/webrest/authentication/login", "application/json", strings.NewReader(`{"username":"alice","password":"pw"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	nonce, ok := strings.CutPrefix(resp.Header.Get("WWW-Authenticate"), "Digest ")
	if resp.StatusCode != 401 || !ok {
		t.Fatalf("legacy login: %d %v", resp.StatusCode, resp.Header)
	}
	m := hmac.New(sha1.New, []byte("pw"))
	m.Write([]byte("alice:pw:" + nonce))
	lc := sioDial(t, api)
	if ev := sioLogin(t, lc, "alice", hex.EncodeToString(m.Sum(nil))); ev != "authe_ok" {
		t.Fatalf("legacy token login: %s", ev)
	}

	var pers struct{ Token string }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code := postJSON(t, base+"/api/tokens/persistent/phone-island", jwt.Token, "", &pers); code == 200 || time.Now().After(deadline) {
			break
		}
	}
	pc := sioDial(t, api)
	if ev := sioLogin(t, pc, "alice", pers.Token); ev != "authe_ok" {
		t.Fatalf("persistent token login: %s", ev)
	}
	var native struct{ Token string }
	postJSON(t, base+"/auth/login", "", `{"username":"alice","password":"pw"}`, &native)
	if ev := sioLogin(t, sioDial(t, api), "201", native.Token); ev != "authe_ok" {
		t.Errorf("native token login: %s", ev)
	}

	if code := postJSON(t, base+"/api/logout", jwt.Token, "", nil); code/100 != 2 {
		t.Fatalf("logout: %d", code)
	}
	if !sioEnded(t, jc) {
		t.Error("the JWT's socket closed without 401 at logout")
	}
	var root struct{ Token string }
	postJSON(t, base+"/auth/login", "", `{"username":"root","password":"pw"}`, &root)
	if code := postJSON(t, base+"/auth/sessions/revoke", root.Token, `{"username":"alice"}`, nil); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	if !sioEnded(t, lc) {
		t.Error("the legacy token's socket closed without 401 at the revocation")
	}
	pc.WriteMessage(websocket.TextMessage, []byte(`421["ping"]`))
	if m, err := sioNext(pc); err != nil || !strings.HasPrefix(m, "431") {
		t.Errorf("persistent token's socket after the revocation: %q %v, want the ping's ack", m, err)
	}
	stop()

	api, stopServe = startServe(t, users, t.TempDir())
	defer stopServe()
	if c, _, err := websocket.DefaultDialer.Dial("ws://"+api+"/api/ws/?EIO=4&transport=websocket", nil); err == nil {
		c.Close()
		t.Error("socket.io served without --nethcti")
	}
}

// TestNethCTISocketUsername: the socket names an extension's user as the
// front's reads do (the first owner in the users file), not as
// sio.UsersDirectory would (the user whose main extension it is).
func TestNethCTISocketUsername(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"201", "202"}},
		{Username: "bob", PasswordHash: h, Role: auth.RoleUser, Endpoints: []string{"202"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(us, auth.Config{})
	eng := calls.New(calls.Config{})
	eng.Publish()
	front, err := nethcti.New(nethcti.Config{Auth: svc, API: http.NotFoundHandler(), State: eng,
		Secret: []byte("0123456789abcdef0123456789abcdef"), Store: nethcti.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	dir := frontDirectory{front, svc.Users}
	for _, x := range []string{"201", "202", "203"} {
		u, ok := dir.UserOf(x)
		name := ""
		if ok {
			name = u.Username
		}
		if name != front.Username(x) {
			t.Errorf("%s: socket %q, REST %q", x, name, front.Username(x))
		}
	}
	if u, _ := sio.UsersDirectory(svc.Users).UserOf("202"); u.Username != "bob" {
		t.Errorf("UsersDirectory: 202 is %s's", u.Username)
	}
}

// TestNethCTIDefaultDeviceEvent: a user's new default device (POST
// /api/user/default_device, the web app's device switch) reaches her
// sockets as updateDefaultDevice with the extension (phone-island
// src/components/Socket.tsx on('updateDefaultDevice'): the island takes
// it as its device), and no one else's.
func TestNethCTIDefaultDeviceEvent(t *testing.T) {
	h, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    password_hash: \""+h+"\"\n    endpoints: [\"201\", \"91201\"]\n"+
		"  - username: bob\n    password_hash: \""+h+"\"\n    endpoints: [\"202\"]\n")
	api, stop := startServe(t, users, t.TempDir(), "--nethcti=true")
	defer stop()
	base := "http://" + api
	login := func(user string) string {
		var jwt struct{ Token string }
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if code := postJSON(t, base+"/api/login", "", `{"username":"`+user+`","password":"pw"}`, &jwt); code == 200 || time.Now().After(deadline) {
				return jwt.Token
			}
		}
	}
	alice, bob := login("alice"), login("bob")
	ac, bc := sioDial(t, api), sioDial(t, api)
	if ev := sioLogin(t, ac, "alice", alice); ev != "authe_ok" {
		t.Fatalf("alice: %s", ev)
	}
	if ev := sioLogin(t, bc, "bob", bob); ev != "authe_ok" {
		t.Fatalf("bob: %s", ev)
	}
	// The settings' database answers 503 until it is migrated; a socket
	// is told authe_ok just before it joins the fan-out, so the switch is
	// asked again until the event comes (at most 5 times).
	msgs := make(chan string, 64)
	go func() {
		defer close(msgs)
		for {
			m, err := sioNext(ac)
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	got := ""
	for try := 0; got == "" && try < 5; try++ {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code := postJSON(t, base+"/api/user/default_device", alice, `{"id":"91201"}`, nil)
			if code == 200 {
				break
			}
			if code != 503 || time.Now().After(deadline) {
				t.Fatalf("POST /api/user/default_device: %d", code)
			}
		}
		timeout := time.After(time.Second)
	wait:
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatal("alice's socket ended")
				}
				if strings.HasPrefix(m, `42["updateDefaultDevice"`) {
					got = m
					break wait
				}
			case <-timeout:
				break wait
			}
		}
	}
	if got != `42["updateDefaultDevice","91201"]` {
		t.Errorf("alice's socket: %q, want updateDefaultDevice 91201", got)
	}
	bc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		_, m, err := bc.ReadMessage()
		if err != nil {
			break
		}
		if strings.Contains(string(m), "updateDefaultDevice") {
			t.Errorf("bob's socket got %s", m)
		}
	}
}
