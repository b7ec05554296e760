package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/pbxsim"
	"github.com/ctibridge/ctibridge/webhook"
)

// busNode is a `ctibridge serve --bus` or `ctibridge edge` run in-process.
type busNode struct {
	api, admin string
	logs       *syncBuffer
	done       chan error
	stop       func() // cancels and waits (once)
}

func startBusNode(t *testing.T, args []string, env map[string]string) *busNode {
	// The node listens on port 0 and its addresses are read from its own
	// "ctibridge serving" line (edge is serve too, and logs it alike): a
	// port found free beforehand could be taken by another test process
	// before the node listens. Nodes reach one another over the bus, not
	// at these addresses, and none is restarted on them.
	n := &busNode{logs: &syncBuffer{}, done: make(chan error, 1)}
	args = append(args, "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data-dir", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		n.done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, n.logs})
	}()
	n.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-n.done; err != nil {
			t.Errorf("%v: %v\n%s", args[:2], err, n.logs)
		}
	})
	t.Cleanup(n.stop)
	a, err := serveReady(n.logs, n.done, 30*time.Second)
	if err != nil {
		t.Fatalf("%v %v:\n%s", args[:2], err, n.logs)
	}
	n.api, n.admin = a.HTTP, a.Admin
	return n
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

// TestBusCDRsOnce: two bridges on the bus share a PostgreSQL; each keeps
// an AMI session of its own for CDRs. Calls end while A leads, A stops,
// more calls end while B takes over and leads: the cdr table holds each
// call once.
func TestBusCDRsOnce(t *testing.T) {
	srv := natstest.Start(t)
	_, dsn := dbtest.NewCluster(t)
	sim, ph := startSimPhone(t, "201")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "ctibridge"}
	args := func(node string) []string {
		return []string{"serve", "--bus", srv.URL(), "--bus-node", node, "--ami", sim.AMIAddr(), "--ami-user", "ctibridge", "--db", dsn}
	}
	a := startBusNode(t, args("bridge-a"), env)
	b := startBusNode(t, args("bridge-b"), env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	calls := 0
	call := func() {
		c, err := ph.Call(ctx, "601")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		c.Hangup(ctx)
		calls++
	}
	for range 3 {
		call()
	}
	a.stop()
	for range 3 {
		call() // during and after B's takeover
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, distinct int
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT uniqueid) FROM cdr`).Scan(&rows, &distinct); err == nil && rows >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d CDR rows after %d calls\n%s", rows, calls, b.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a late duplicate would show now
	conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT uniqueid) FROM cdr`).Scan(&rows, &distinct)
	if rows != calls || distinct != calls {
		t.Errorf("%d rows, %d distinct uniqueids in cdr after %d calls; want %d", rows, distinct, calls, calls)
	}
}

// startSimPhone starts pbxsim and a registered SIP phone on it.
func startSimPhone(t *testing.T, exten string) (*pbxsim.PBX, *pbxsim.Phone) {
	sim, err := pbxsim.New(pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { sim.Run(ctx) })
	ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: exten, Server: sim.SIPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { ph.Run(ctx) })
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := ph.Register(rctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	return sim, ph
}

// TestBusBridgeAndEdge: `ctibridge serve --bus` against pbxsim and
// `ctibridge edge` on one NATS server. Both become ready, say the same
// epoch, serve the same extensions; a click-to-call made on the edge
// reaches the PBX through the bridge and the call shows on the edge.
func TestBusBridgeAndEdge(t *testing.T) {
	srv := natstest.Start(t)
	sim, _ := startSimPhone(t, "201")

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
	out, err = checkConfig(t, nil, "--bus-edge=true", "--bus", "nats://n1:4222", "--bus-roll-mib", "-1")
	if want := "error: --bus-roll-mib: negative rollover setting"; err == nil || !strings.Contains(out, want) {
		t.Errorf("--bus-roll-mib -1: %v, output lacks %q:\n%s", err, want, out)
	}
	out, err = checkConfig(t, nil, "--bus-edge=true", "--bus", "nats://n1:4222", "--bus-yield-after", "-1s")
	if want := "error: --bus-yield-after: negative"; err == nil || !strings.Contains(out, want) {
		t.Errorf("--bus-yield-after -1s: %v, output lacks %q:\n%s", err, want, out)
	}
}

// TestBusYieldSetting: --bus-yield-after is bus.Config.YieldAfter, its 0
// the config's never (negative), its default the bus's.
func TestBusYieldSetting(t *testing.T) {
	for _, c := range []struct {
		flag time.Duration
		want time.Duration
	}{{bus.DefaultYieldAfter, bus.DefaultYieldAfter}, {3 * time.Second, 3 * time.Second}, {0, -1}} {
		if got := (busConfig{yieldAfter: c.flag}).yieldSetting(); got != c.want {
			t.Errorf("--bus-yield-after %v: bus.Config.YieldAfter %v, want %v", c.flag, got, c.want)
		}
	}
	s := &settings{}
	var c busConfig
	busSettings(s, &c)
	if c.yieldAfter != bus.DefaultYieldAfter {
		t.Errorf("default --bus-yield-after %v, want %v", c.yieldAfter, bus.DefaultYieldAfter)
	}
}

// wsSubscribe opens the WebSocket on n, subscribes (resuming from since
// under epoch when epoch is set) and returns the connection and the
// first answer: a snapshot or resumed.
func (n *busNode) wsSubscribe(t *testing.T, token, epoch string, since uint64) (*websocket.Conn, wsMsg) {
	c, _, err := websocket.DefaultDialer.Dial("ws://"+n.api+"/ws?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sub := map[string]any{"op": "subscribe", "topics": []string{"extensions"}}
	if epoch != "" {
		sub["since"], sub["epoch"] = since, epoch
	}
	if err := c.WriteJSON(sub); err != nil {
		t.Fatal(err)
	}
	return c, readOp(t, c, "snapshot", "resumed")
}

type wsMsg struct {
	Op    string
	Seq   uint64
	Epoch string
}

// readOp reads c until a message of one of ops.
func readOp(t *testing.T, c *websocket.Conn, ops ...string) wsMsg {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var m wsMsg
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("reading the WebSocket for %v: %v", ops, err)
		}
		for _, op := range ops {
			if m.Op == op {
				return m
			}
		}
	}
}

// metric reads one sample of /metrics on n ("" when absent).
func (n *busNode) metric(t *testing.T, sample string) string {
	_, body := get(t, "http://"+n.admin+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestBusRolloverWebSocket: `serve --bus --bus-roll-age 2s` and an edge.
// The op log rolls over (ctibridge_bus_generation on /metrics); a
// WebSocket client connected across it is sent a new snapshot under the
// same epoch, and one resuming from a seq of the old generation gets a
// full snapshot, not a resume. Only the leading bridge sends webhooks:
// both bridges and the edge have them configured, each event reaches the
// receiver once. /metrics tells each node's role.
func TestBusRolloverWebSocket(t *testing.T) {
	srv := natstest.Start(t)
	sim, ph := startSimPhone(t, "201")
	var mu sync.Mutex
	seen := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e webhook.Event
		json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		seen[e.ID]++
		mu.Unlock()
	}))
	defer recv.Close()
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.URL+"/in\n    secret: 0123456789abcdef0123\n")
	hash, _ := auth.HashPassword("alice-pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    name: Alice\n    password_hash: \""+hash+"\"\n    endpoints: [\"201\"]\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "ctibridge", "CTIBRIDGE_USERS": users, "CTIBRIDGE_WEBHOOKS": hooks}
	bridge := func(node, age string) *busNode {
		return startBusNode(t, []string{"serve", "--bus", srv.URL(), "--bus-node", node, "--ami", sim.AMIAddr(), "--ami-user", "ctibridge", "--bus-roll-age", age}, env)
	}
	a := bridge("bridge-a", "3s")
	b := bridge("bridge-b", "0")
	edge := startBusNode(t, []string{"edge", "--bus", srv.URL(), "--bus-node", "edge-1"}, env)
	for n, role := range map[*busNode]string{a: "leader", b: "standby", edge: "edge"} {
		if v := n.metric(t, `ctibridge_bus_role{role="`+role+`"}`); v != "1" {
			t.Errorf("%s: ctibridge_bus_role{role=%q} = %q, want 1", n.api, role, v)
		}
	}
	// At least 1: the age of 3 s may have passed while the three nodes
	// started, on a loaded machine (generation 2 to 4 seen at load 18-20).
	if v, err := strconv.Atoi(edge.metric(t, "ctibridge_bus_generation")); err != nil || v < 1 {
		t.Fatalf("edge: ctibridge_bus_generation = %d (%v) before the rollover", v, err)
	}
	token := edge.login(t, "alice", "alice-pw")
	conn, first := edge.wsSubscribe(t, token, "", 0)
	if first.Op != "snapshot" || first.Epoch == "" {
		t.Fatalf("first answer %+v", first)
	}
	// Calls end while the log rolls over.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 3 {
		c, err := ph.Call(ctx, "601")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		c.Hangup(ctx)
		<-c.Done()
	}
	// A call up across a rollover: no webhook says it hung up.
	long, err := ph.Call(ctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	shown := func() bool {
		_, body := edge.do(t, token, "GET", "/astproxy/extension/201", "")
		return strings.Contains(body, `"counterpartNum":"601"`)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !shown() {
		if time.Now().After(deadline) {
			t.Fatal("the long call never showed on the edge")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// leads says which bridge took the lead how often (a takeover resends
	// the call events and CDRs the new leader held, some sent already:
	// the failures' diagnostics).
	leads := func() string {
		return "takeovers: bridge-a " + a.metric(t, "ctibridge_bus_takeovers_total") + ", bridge-b " + b.metric(t, "ctibridge_bus_takeovers_total")
	}
	hangups := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for id := range seen {
			if strings.HasSuffix(id, ":hangup") {
				n++
			}
		}
		return n
	}
	// The short calls' hangups are sent in the background: wait for the
	// three before counting (a late one read as the rollover's once).
	deadline = time.Now().Add(10 * time.Second)
	for hangups() < 3 {
		if time.Now().After(deadline) {
			mu.Lock()
			t.Logf("webhook events: %v", seen)
			mu.Unlock()
			t.Fatalf("%d hangup webhooks for the 3 short calls (%s); bridge-a:\n%s\nbridge-b:\n%s", hangups(), leads(), a.logs, b.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := hangups()
	g0 := edge.metric(t, "ctibridge_bus_generation")
	deadline = time.Now().Add(20 * time.Second)
	for edge.metric(t, "ctibridge_bus_generation") == g0 {
		if time.Now().After(deadline) {
			t.Fatalf("no rollover: generation %s\n%s", edge.metric(t, "ctibridge_bus_generation"), a.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !shown() || !strings.Contains(edge.metric(t, `ctibridge_bus_role{role="edge"}`), "1") {
		if time.Now().After(deadline) {
			t.Fatal("the long call is not shown on the edge after the rollover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if n := hangups(); n != before {
		t.Fatalf("%d hangup webhooks across the rollover while the call is up (%d before)", n, before)
	}
	long.Hangup(ctx)
	<-long.Done()
	deadline = time.Now().Add(10 * time.Second)
	for hangups() != before+1 {
		if time.Now().After(deadline) {
			mu.Lock()
			t.Logf("webhook events: %v", seen)
			mu.Unlock()
			t.Fatalf("the long call's hangup: %d hangup webhooks, want %d (%s); bridge-a:\n%s\nbridge-b:\n%s", hangups(), before+1, leads(), a.logs, b.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again := readOp(t, conn, "snapshot")
	if again.Epoch != first.Epoch || again.Seq <= first.Seq {
		t.Fatalf("after the rollover the connected client got %+v, before %+v", again, first)
	}
	_, resumed := edge.wsSubscribe(t, token, first.Epoch, first.Seq)
	if resumed.Op != "snapshot" || resumed.Epoch != first.Epoch {
		t.Fatalf("a resume from seq %d of the old generation: %+v, want a snapshot", first.Seq, resumed)
	}
	if v := a.metric(t, "ctibridge_bus_rollovers_total"); v == "" || v == "0" {
		t.Errorf("bridge-a: ctibridge_bus_rollovers_total = %q", v)
	}
	// Webhooks: every event once, from the leader. A takeover (the
	// lease lost on a loaded machine: bridge-a took the lead more than
	// once, or bridge-b at all) resends what the new leader held, under
	// the same keys: repeats are then the receiver's to drop.
	time.Sleep(time.Second)
	takeovers := func(n *busNode) int {
		v, _ := strconv.Atoi(n.metric(t, "ctibridge_bus_takeovers_total"))
		return v
	}
	tookOver := takeovers(b) > 0 || takeovers(a) > 1
	mu.Lock()
	defer mu.Unlock()
	cdrs := 0
	for id, n := range seen {
		if n != 1 && !tookOver {
			t.Errorf("webhook event %s received %d times (%s)", id, n, leads())
		}
		if strings.Contains(id, ":cdr:") {
			cdrs++
		}
	}
	if cdrs != 4 {
		t.Errorf("%d cdr events, want 4: %v", cdrs, seen)
	}
	if t.Failed() {
		t.Logf("%s", leads())
	}
}
