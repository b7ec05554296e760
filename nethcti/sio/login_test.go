package sio

import (
	"encoding/json"
	"testing"
	"time"
)

// TestLogin: a login with a good token gets authe_ok at either path, a
// ping with an ack is acknowledged; a bad token, another user's token, a
// wrong uaType or no token get 401 and are disconnected, as NethCTI does.
func TestLogin(t *testing.T) {
	e := newEnv(t, Config{})
	for _, p := range []string{"/api/ws", "/socket.io"} {
		c := e.dialRaw(p)
		c.login("alice", e.token("alice"), "desktop")
		if ev := c.expect("authe_ok"); string(ev.Data) != `{"message":"authorized successfully"}` {
			t.Errorf("%s: authe_ok %s", p, ev.Data)
		}
		c.send(`427["ping"]`)
		if ev := c.expect("ack"); string(ev.Data) != "[]" {
			t.Errorf("%s: ping ack %s", p, ev.Data)
		}
	}
	// By extension, as NethCTI also accepts.
	c := e.dialRaw("/api/ws")
	c.emit("login", `{"accessKeyId":"201","token":"`+e.token("alice")+`"}`)
	c.expect("authe_ok")

	for name, login := range map[string]string{
		"bad token":     `{"accessKeyId":"alice","token":"nope","uaType":"desktop"}`,
		"another's":     `{"accessKeyId":"bob","token":"` + e.token("alice") + `"}`,
		"bad uaType":    `{"accessKeyId":"alice","token":"` + e.token("alice") + `","uaType":"tv"}`,
		"no token":      `{"accessKeyId":"alice"}`,
		"not an object": `"alice"`,
	} {
		c := e.dialRaw("/api/ws")
		c.emit("login", login)
		if ev := c.expect("401"); string(ev.Data) != `{"message":"unauthorized access"}` {
			t.Errorf("%s: 401 %s", name, ev.Data)
		}
		c.expect("disconnect")
	}
	if n := e.srv.Clients(); n != 3 {
		t.Errorf("%d clients logged in, want 3", n)
	}
}

// TestTakeOver: a second login of a user with the same uaType tells the
// first takeOver; the second gets authe_ok when the first answers
// takeOverAck, or when TakeOverWait has passed. Another uaType takes
// nothing over.
func TestTakeOver(t *testing.T) {
	wait := 3 * time.Second
	e := newEnv(t, Config{TakeOverWait: wait})
	first := e.dialRaw("/api/ws")
	first.login("alice", e.token("alice"), "desktop")
	first.expect("authe_ok")
	mobile := e.dialRaw("/api/ws")
	mobile.login("alice", e.token("alice"), "mobile")
	mobile.expect("authe_ok")
	first.quiet("takeOver", 200*time.Millisecond)

	second := e.dialRaw("/api/ws")
	start := time.Now()
	second.login("alice", e.token("alice"), "desktop")
	first.expect("takeOver")
	first.emit("takeOverAck", "")
	second.expect("authe_ok")
	if d := time.Since(start); d >= wait {
		t.Errorf("authe_ok after the ack took %v", d)
	}
	mobile.quiet("takeOver", 200*time.Millisecond)

	// No ack: the login goes on after TakeOverWait.
	third := e.dialRaw("/socket.io")
	start = time.Now()
	third.login("alice", e.token("alice"), "desktop")
	second.expect("takeOver")
	third.expect("authe_ok")
	if d := time.Since(start); d < wait {
		t.Errorf("authe_ok without an ack after %v, want at least %v", d, wait)
	}
}

// TestRevoked: a client whose session is revoked is told 401 and
// disconnected, as /ws closes it.
func TestRevoked(t *testing.T) {
	e := newEnv(t, Config{})
	tok := e.token("bob")
	c := e.dialRaw("/api/ws")
	c.login("bob", tok, "desktop")
	c.expect("authe_ok")
	e.auth.Logout(tok)
	c.expect("401")
	c.expect("disconnect")
}

// TestEvents: a call from 201 to 202 (a real Asterisk's recording) reaches
// alice's client as NethCTI's events: extenUpdate with username and
// chSource/chDest, extenConnected when answered, extenHangup (before the
// update that drops the conversation), userMainPresenceUpdate.
func TestEvents(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dialRaw("/api/ws")
	c.login("alice", e.token("alice"), "desktop")
	c.expect("authe_ok")
	for _, m := range loadRecording(t, "basic_call_caller_hangup") {
		e.apply(m)
	}
	var sawConv, sawConnected, sawHangup, sawBusy bool
	deadline := time.After(10 * time.Second)
	for !(sawConv && sawConnected && sawHangup && sawBusy) {
		var ev sioEvent
		select {
		case ev = <-c.events:
		case <-deadline:
			t.Fatalf("conversation %v, extenConnected %v, extenHangup %v, busy presence %v", sawConv, sawConnected, sawHangup, sawBusy)
		}
		switch ev.Name {
		case "extenUpdate":
			var x struct {
				Exten, Username string
				Conversations   map[string]struct {
					Direction        string
					ChSource, ChDest struct{ CallerNum string }
				}
			}
			if err := json.Unmarshal(ev.Data, &x); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"201": "alice", "202": "bob"}[x.Exten]
			if x.Username != want {
				t.Errorf("extension %s: username %q, want %q", x.Exten, x.Username, want)
			}
			for _, cv := range x.Conversations {
				if x.Exten == "201" && cv.Direction == "out" {
					sawConv = true
					if cv.ChSource.CallerNum != "201" || cv.ChDest.CallerNum != "202" {
						t.Errorf("201 calling 202: chSource %q chDest %q", cv.ChSource.CallerNum, cv.ChDest.CallerNum)
					}
				}
			}
			if sawHangup && x.Exten == "201" && len(x.Conversations) > 0 {
				t.Errorf("extenHangup came before 201's conversation ended")
			}
		case "extenConnected":
			if string(ev.Data) != `{"extenConnected":"201"}` {
				t.Errorf("extenConnected %s", ev.Data)
			}
			sawConnected = true
		case "extenHangup":
			if string(ev.Data) != `{"callerNum":"201","channelExten":"201","cause":"normal_clearing"}` {
				t.Errorf("extenHangup %s", ev.Data)
			}
			sawHangup = true
		case "userMainPresenceUpdate":
			if string(ev.Data) == `{"mainPresence":{"username":"alice","status":"busy"}}` {
				sawBusy = true
			}
		}
	}
}

// TestLoginAtConnect: clients that send their login as soon as they are
// connected (as socket.io-client's users do, on "connect") all get in.
// The library answers the connect before it files the socket under its
// namespace; a login read in between made it drop the connection
// (joinWait), one client in a few hundred.
func TestLoginAtConnect(t *testing.T) {
	e := newEnv(t, Config{})
	for range 300 {
		c := e.dialRaw("/api/ws")
		c.emit("login", `{"accessKeyId":"root","token":"`+e.token("root")+`"}`)
		c.expect("authe_ok")
	}
}

// TestEventAfterAutheOK: a change made as soon as a client has its
// authe_ok reaches it, login after login (phone-island reads the state
// at authe_ok and counts on the events from then on). The client was
// filed for the fan-out after authe_ok went out: a change pumped in
// between was not sent to it.
func TestEventAfterAutheOK(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range 300 {
		c := e.dialRaw("/api/ws")
		c.emit("login", `{"accessKeyId":"alice","token":"`+e.token("alice")+`"}`)
		c.expect("authe_ok")
		e.apply(devState("201", i%2 == 0))
		timeout := time.After(10 * time.Second)
		for got := false; !got; {
			select {
			case ev, ok := <-c.events:
				if !ok {
					t.Fatalf("login %d: the client ended", i)
				}
				var x struct{ Exten string }
				got = ev.Name == "extenUpdate" && json.Unmarshal(ev.Data, &x) == nil && x.Exten == "201"
			case <-timeout:
				t.Fatalf("login %d: no extenUpdate after authe_ok in 10 s", i)
			}
		}
		c.conn.Close()
	}
}
