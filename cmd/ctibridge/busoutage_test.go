package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus/natstest"
)

// TestBusEdgeOutage: a bridge and an edge on a 3-server NATS cluster;
// every server is killed with a call up, and the call hangs up; one
// comes back at once, alone (no JetStream leader), the two others 22 s
// later. Throughout, the edge process stays up, its REST reads say
// X-Ctibridge-Stale and /readyz answers 503; once the cluster is whole
// it is ready again and serves what the bridge serves, the hangup
// included (bus.TestOutageLongerThanRetries holds the seqs).
func TestBusEdgeOutage(t *testing.T) {
	cluster := natstest.Cluster(t, 3)
	url := natstest.URLs(cluster)
	sim, phone := startSimPhone(t, "201")
	hash, _ := auth.HashPassword("alice-pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    name: Alice\n    password_hash: \""+hash+"\"\n    endpoints: [\"201\"]\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "ctibridge", "CTIBRIDGE_USERS": users}
	bridge := startBusNode(t, []string{"serve", "--bus", url, "--bus-node", "bridge-a", "--ami", sim.AMIAddr(), "--ami-user", "ctibridge"}, env)
	edge := startBusNode(t, []string{"edge", "--bus", url, "--bus-node", "edge-1"}, env)
	bt, et := bridge.login(t, "alice", "alice-pw"), edge.login(t, "alice", "alice-pw")
	// read is the edge's REST view of 201: its stale header and body.
	read := func() (stale, body string) {
		req, _ := http.NewRequest("GET", "http://"+edge.api+"/astproxy/extension/201", nil)
		req.Header.Set("Authorization", "Bearer "+et)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("X-Ctibridge-Stale"), string(b)
	}
	up := func() bool {
		select {
		case err := <-edge.done:
			edge.done <- err // for its cleanup
			t.Fatalf("the edge stopped: %v", err)
		case err := <-bridge.done:
			bridge.done <- err
			t.Fatalf("the bridge stopped: %v", err)
		default:
		}
		return true
	}
	call, err := phone.Call(t.Context(), "601")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "201's call on the edge, live", 15*time.Second, func() bool {
		stale, body := read()
		return stale == "" && strings.Contains(body, `"counterpartNum":"601"`)
	})

	for _, s := range cluster {
		s.Kill()
	}
	killed := time.Now()
	call.Hangup(t.Context())
	if err := cluster[0].Relaunch(); err != nil { // alone: not healthy, not waited for
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the disconnect is said at once
	for time.Since(killed) < 22*time.Second {
		up()
		stale, _ := read()
		code, _ := get(t, "http://"+edge.admin+"/readyz")
		if stale != "true" || code != http.StatusServiceUnavailable {
			t.Fatalf("%v into the outage the edge's REST says X-Ctibridge-Stale %q, /readyz %d", time.Since(killed).Round(time.Millisecond), stale, code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := natstest.Rejoin(cluster, cluster[1:]); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the edge ready again, as the bridge", 60*time.Second, func() bool {
		up()
		code, _ := get(t, "http://"+edge.admin+"/readyz")
		stale, e := read()
		_, b := bridge.do(t, bt, "GET", "/astproxy/extension/201", "")
		return code == http.StatusOK && stale == "" && e == b && !strings.Contains(e, `"counterpartNum":"601"`)
	})
}

func waitUntil(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
