package sio

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeDir is where scripts/test.sh installs the npm packages the tests
// run ($CTIBRIDGE_NODE_DIR; by default the user's cache, as test.sh has
// it). Inside the suite (the variable set) a missing package fails the
// test; outside it the test skips and says how to install it.
func nodeDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CTIBRIDGE_NODE_DIR")
	inSuite := dir != ""
	if !inSuite {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory for the npm packages: %v", err)
		}
		dir = filepath.Join(cache, "ctibridge", "node")
	}
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "node is not installed (Debian package nodejs)"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "socket.io-client", "package.json")); err != nil {
		why = "the npm package socket.io-client is not in " + dir + " (scripts/test.sh installs it: npm install --prefix " + dir + " socket.io-client@4)"
	}
	if why != "" {
		if inSuite {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return dir
}

// nodeClient runs testdata/client.js: the official socket.io client.
type nodeClient struct {
	t      *testing.T
	events chan sioEvent
}

func (e *env) dialNode(t *testing.T, dir, path, user, token, ua string) *nodeClient {
	t.Helper()
	cmd := exec.Command("node", "testdata/client.js", e.http.URL, path, user, token, ua)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &nodeClient{t: t, events: make(chan sioEvent, 4096)}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Event string
				Data  json.RawMessage
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.events <- sioEvent{Name: ev.Event, Data: ev.Data}
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// expect returns the next event named name, skipping others.
func (c *nodeClient) expect(name string) sioEvent {
	c.t.Helper()
	return expectEvent(c.t, c.events, name)
}

// TestNodeClient: the official socket.io client, as phone-island opens
// it, logs in at /api/ws and /socket.io, gets authe_ok and an ack to its
// ping, then an extension's change as extenUpdate; a bad token gets 401
// and the server's disconnect; a second login of the same user and
// uaType tells the first takeOver (and its takeOverAck lets the second
// in).
func TestNodeClient(t *testing.T) {
	dir := nodeDir(t)
	// Only the takeOverAck lets the second login in before the test's
	// own timeout.
	e := newEnv(t, Config{TakeOverWait: time.Minute})
	alice := e.dialNode(t, dir, "/api/ws", "alice", e.token("alice"), "desktop")
	alice.expect("authe_ok")
	alice.expect("pingAck")
	legacy := e.dialNode(t, dir, "/socket.io", "bob", e.token("bob"), "mobile")
	legacy.expect("authe_ok")

	e.apply(devState("201", true))
	for _, c := range []*nodeClient{alice, legacy} {
		var x struct{ Exten, Username, Status string }
		json.Unmarshal(c.expect("extenUpdate").Data, &x)
		if x.Exten != "201" || x.Username != "alice" || x.Status != "busy" {
			t.Errorf("extenUpdate %+v", x)
		}
	}

	bad := e.dialNode(t, dir, "/api/ws", "alice", "not-a-token", "desktop")
	bad.expect("401")
	if ev := bad.expect("disconnect"); string(ev.Data) != `"io server disconnect"` {
		t.Errorf("refused: disconnect %s", ev.Data)
	}

	second := e.dialNode(t, dir, "/api/ws", "alice", e.token("alice"), "desktop")
	alice.expect("takeOver")
	second.expect("authe_ok")
}

// TestNodePrivacy: an outside caller reaches bob (202) through the trunk;
// root sees the caller's number in 202's extenUpdate, alice (who may not
// see bob's calls) gets the same call with it hidden, as /ws hides it.
func TestNodePrivacy(t *testing.T) {
	dir := nodeDir(t)
	e := newEnv(t, Config{})
	root := e.dialNode(t, dir, "/api/ws", "root", e.token("root"), "desktop")
	root.expect("authe_ok")
	alice := e.dialNode(t, dir, "/api/ws", "alice", e.token("alice"), "desktop")
	alice.expect("authe_ok")
	// The recording up to bob's answer.
	caller := ""
	for _, m := range loadRecording(t, "inbound_trunk_did") {
		e.apply(m)
		for _, cv := range e.eng.Snapshot().Extensions.Get("202").Conversations {
			if cv.Connected {
				caller = cv.CounterpartNum
			}
		}
		if caller != "" {
			break
		}
	}
	if caller == "" {
		t.Fatal("bob never answered")
	}
	e.apply(devState("209", true)) // a marker: what came before is out
	last := func(c *nodeClient) (data string, convs int) {
		for {
			ev := c.expect("extenUpdate")
			var x struct {
				Exten         string
				Conversations map[string]struct{ CounterpartNum string }
			}
			json.Unmarshal(ev.Data, &x)
			if x.Exten == "209" {
				return data, convs
			}
			if x.Exten == "202" {
				data, convs = string(ev.Data), len(x.Conversations)
			}
		}
	}
	rootLast, rootConvs := last(root)
	aliceLast, aliceConvs := last(alice)
	if !strings.Contains(rootLast, `"counterpartNum":"`+caller+`"`) {
		t.Errorf("root does not see bob's caller %s: %s", caller, rootLast)
	}
	if aliceConvs == 0 || aliceConvs != rootConvs {
		t.Fatalf("alice sees %d conversations of bob, root %d: %s", aliceConvs, rootConvs, aliceLast)
	}
	if strings.Contains(aliceLast, caller) {
		t.Errorf("alice sees bob's caller %s: %s", caller, aliceLast)
	}
}
