package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// twoPBXBridges starts one nats-server and two pbxsim PBXs, the default
// one and site2, and returns the server's URL, the PBXs and what starts
// a bridge of both (user admin, password pw) named node, with more
// arguments.
func twoPBXBridges(t *testing.T) (url string, def, s2 *simSite, bridge func(node string, more ...string) *busNode) {
	srv := natstest.Start(t)
	def, s2 = startSimSite(t), startSimSite(t)
	hash, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - {username: admin, role: admin, password_hash: \""+hash+"\"}\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": pbxsim.DefaultAMISecret, "CTIBRIDGE_USERS": users}
	return srv.URL(), def, s2, func(node string, more ...string) *busNode {
		return startBusNode(t, append([]string{"serve", "--bus", srv.URL(), "--bus-node", node, "--ami", def.pbx.AMIAddr(),
			"--ami-user", pbxsim.DefaultAMIUser, "--pbx", "site2=" + s2.pbx.AMIAddr(), "--access-log-every", "-1"}, more...), env)
	}
}

// busRoles is a bus node's role for the default PBX and site2, read
// from its /metrics.
func busRoles(t *testing.T, n *busNode) [2]string {
	var out [2]string
	for i, pbx := range []string{"default", "site2"} {
		for _, r := range []string{"leader", "standby"} {
			if n.metric(t, `ctibridge_bus_role{pbx="`+pbx+`",role="`+r+`"}`) == "1" {
				out[i] = r
			}
		}
	}
	return out
}

// waitBusRoles waits 20 s at most for n's roles (busRoles) to be want.
func waitBusRoles(t *testing.T, n *busNode, want [2]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for busRoles(t, n) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: roles (default, site2) %v, want %v\n%s", n.api, busRoles(t, n), want, n.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBusPreferredLeaders: bridges A and B follow the default PBX and
// site2, A with --bus-prefer default, B with --bus-prefer site2. A,
// started first, leads both; B, once up, is handed site2 over (A's log
// says so, no deposal) and the default PBX stays A's: one leader each.
// B stopped, A leads both; B started again gets site2 back.
func TestBusPreferredLeaders(t *testing.T) {
	_, _, _, start := twoPBXBridges(t)
	bridge := func(node, prefer string) *busNode { return start(node, "--bus-prefer", prefer) }
	a := bridge("bridge-a", "default")
	waitBusRoles(t, a, [2]string{"leader", "leader"})
	b := bridge("bridge-b", "site2")
	waitBusRoles(t, b, [2]string{"standby", "leader"})
	waitBusRoles(t, a, [2]string{"leader", "standby"})
	if logs := a.logs.String(); !strings.Contains(logs, "handed over: a bridge that prefers this PBX leads it") || strings.Contains(logs, "deposed") {
		t.Errorf("bridge-a's log after the handover of site2:\n%s", logs)
	}
	b.stop()
	waitBusRoles(t, a, [2]string{"leader", "leader"})
	b = bridge("bridge-b", "site2")
	waitBusRoles(t, b, [2]string{"standby", "leader"})
	waitBusRoles(t, a, [2]string{"leader", "standby"})
}
