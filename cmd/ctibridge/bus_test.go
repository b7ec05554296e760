package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// busNode is a `ctibridge serve --bus` or `ctibridge edge` run in-process.
type busNode struct {
	api, admin string
	logs       *syncBuffer
	done       chan error
}

func startBusNode(t *testing.T, args []string, env map[string]string) *busNode {
	n := &busNode{api: freeAddr(t), admin: freeAddr(t), logs: &syncBuffer{}, done: make(chan error, 1)}
	args = append(args, "--http", n.api, "--admin", n.admin, "--data-dir", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { n.done <- run(ctx, args, func(k string) string { return env[k] }, nil, io.Discard, n.logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-n.done; err != nil {
			t.Errorf("%v: %v\n%s", args[:2], err, n.logs)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get(t, "http://"+n.admin+"/readyz"); code == http.StatusOK {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never ready:\n%s", args[:2], n.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *busNode) login(t *testing.T, user, pw string) string {
	resp, err := http.Post("http://"+n.api+"/auth/login", "application/json", strings.NewReader(`{"username":"`+user+`","password":"`+pw+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var login struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&login)
	if login.Token == "" {
		t.Fatalf("login on %s: %d", n.api, resp.StatusCode)
	}
	return login.Token
}

func (n *busNode) do(t *testing.T, token, method, path, body string) (int, string) {
	req, _ := http.NewRequest(method, "http://"+n.api+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hello opens the WebSocket and returns the hello's epoch.
func (n *busNode) epoch(t *testing.T, token string) string {
	c, _, err := websocket.DefaultDialer.Dial("ws://"+n.api+"/ws?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hello struct{ Op, Epoch string }
	if err := c.ReadJSON(&hello); err != nil || hello.Op != "hello" || hello.Epoch == "" {
		t.Fatalf("hello: %+v %v", hello, err)
	}
	return hello.Epoch
}

// TestBusBridgeAndEdge: `ctibridge serve --bus` against pbxsim and
// `ctibridge edge` on one NATS server. Both become ready, say the same
// epoch, serve the same extensions; a click-to-call made on the edge
// reaches the PBX through the bridge and the call shows on the edge.
func TestBusBridgeAndEdge(t *testing.T) {
	srv := natstest.Start(t)
	sim, err := pbxsim.New(pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	simDone := make(chan struct{})
	go func() { sim.Run(sctx); close(simDone) }()
	defer func() { scancel(); <-simDone }()
	ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: "201", Server: sim.SIPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	go ph.Run(sctx)
	rctx, rcancel := context.WithTimeout(sctx, 5*time.Second)
	defer rcancel()
	if err := ph.Register(rctx, time.Hour); err != nil {
		t.Fatal(err)
	}

	hash, _ := auth.HashPassword("alice-pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    name: Alice\n    password_hash: \""+hash+"\"\n    endpoints: [\"201\"]\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "ctibridge", "CTIBRIDGE_USERS": users}
	bridge := startBusNode(t, []string{"serve", "--bus", srv.URL(), "--bus-node", "bridge-a", "--ami", sim.AMIAddr(), "--ami-user", "ctibridge"}, env)
	edge := startBusNode(t, []string{"edge", "--bus", srv.URL(), "--bus-node", "edge-1"}, env)

	bt, et := bridge.login(t, "alice", "alice-pw"), edge.login(t, "alice", "alice-pw")
	if a, b := bridge.epoch(t, bt), edge.epoch(t, et); a != b {
		t.Errorf("epochs differ: bridge %s, edge %s", a, b)
	}
	if code, body := edge.do(t, et, "POST", "/astproxy/call", `{"number":"601","endpointId":"201"}`); code != http.StatusOK {
		t.Fatalf("click-to-call on the edge: %d %s", code, body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, b := bridge.do(t, bt, "GET", "/astproxy/extension/201", "")
		_, e := edge.do(t, et, "GET", "/astproxy/extension/201", "")
		if strings.Contains(e, `"counterpartNum":"601"`) && b == e {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call made on the edge does not show the same on both:\nbridge %s\nedge   %s", b, e)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// An edge refuses what the user may not do, before the bus.
	if code, _ := edge.do(t, et, "POST", "/astproxy/call", `{"number":"601","endpointId":"202"}`); code != http.StatusForbidden {
		t.Errorf("call from another's endpoint on the edge: %d, want 403", code)
	}
}

// TestCheckConfigBus: check-config names bad bus settings; an edge needs
// no manager credentials but needs --bus.
func TestCheckConfigBus(t *testing.T) {
	out, err := checkConfig(t, nil, "--bus-edge=true", "--bus-pbx", "main pbx")
	if err == nil {
		t.Fatalf("no error:\n%s", out)
	}
	for _, want := range []string{`error: --bus-edge: an edge needs --bus`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ami-user") || strings.Contains(out, "ami-secret") {
		t.Errorf("an edge was asked for manager credentials:\n%s", out)
	}
	out, err = checkConfig(t, nil, "--bus-edge=true", "--bus", "http://n1:4222,nats://n2:4222", "--bus-pbx", "main pbx")
	if err == nil {
		t.Fatalf("no error:\n%s", out)
	}
	for _, want := range []string{`error: --bus: "http://n1:4222" is not a NATS server URL`, `error: --bus-pbx: bus: PBX name "main pbx"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err := checkConfig(t, nil, "--bus-edge=true", "--bus", "nats://n1:4222, tls://n2:4222"); err != nil {
		t.Errorf("a good edge configuration: %v\n%s", err, out)
	}
}
