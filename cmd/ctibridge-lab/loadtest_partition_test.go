package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestLoadtestFailoverPartition: one partition round of `loadtest
// failover`, after one leader kill: the leading bridge's NATS
// connections, which go through a network namespace, are cut by taking
// its veth link down while its AMI link and REST stay up, and `POST
// /astproxy/call` is asked of it every 100 ms. The run's invariants must
// hold (the other bridge takes over, every edge live again, no firm
// mismatch while live), and by hand here: the cut-off bridge accepted
// actions within its grant, which reached pbxsim, refused the later ones
// with 503 lease_stale, stepped down before the other bridge's lease and
// AMI login, pbxsim got no action of it after that login, and it
// rejoined once healed. It needs root (ip netns, veth): skipped with the
// reason otherwise.
func TestLoadtestFailoverPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nats-servers, pbxsim, SIPp, PostgreSQL and four ctibridge processes")
	}
	if _, err := exec.LookPath("sipp"); err != nil {
		t.Skip("sipp not installed (scripts/test.sh installs it)")
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) == 0 {
		t.Skip("no PostgreSQL binaries")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"failover", "--bin", testBin, "--kills", "1", "--partitions", "1", "--nats-kills", "-1", "--edge-kills", "-1",
		"--settle", "1s", "--json", "--dir", filepath.Join(dir, "work"), "--keep"}
	var out, errb bytes.Buffer
	start := time.Now()
	err := runLoadtest(ctx, args, testEnv, &out, &errb)
	t.Logf("took %v", time.Since(start))
	var rep struct {
		Partitions []struct {
			Cut                      string
			Leader                   string        `json:"new_leader"`
			StepDown                 time.Duration `json:"step_down_ns"`
			Lease                    time.Duration `json:"lease_ns"`
			Opened                   time.Duration `json:"opened_ns"`
			Live                     time.Duration `json:"live_ns"`
			Rejoined                 time.Duration `json:"rejoined_ns"`
			LastAccepted             time.Duration `json:"last_accepted_ns"`
			Asked, Accepted, Reached int
			Refused                  int            `json:"refused_lease_stale"`
			Other                    map[string]int `json:"other"`
			NotLeader                int            `json:"not_leader_actions"`
			NotLeaderFirst           []string       `json:"not_leader_first"`
			Error                    string
		}
		Firm     struct{ Samples, Mismatches int }
		Counters map[string]float64
		Notes    []string
	}
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("%v (%v): %s\nstderr: %s", jerr, err, out.String(), errb.String())
	}
	if rep.Counters["failover.partitions_skipped"] > 0 {
		t.Skipf("no network namespace: %v", rep.Notes)
	}
	if err != nil {
		t.Fatalf("%v\nreport: %s\nstderr: %s", err, out.String(), errb.String())
	}
	if len(rep.Partitions) != 1 {
		t.Fatalf("%d partitions, want 1: %s", len(rep.Partitions), out.String())
	}
	p := rep.Partitions[0]
	t.Logf("partition: %+v; firm %+v", p, rep.Firm)
	if p.Error != "" || p.Leader == "" || p.Leader == p.Cut || p.Live < 0 || p.Rejoined < 0 {
		t.Errorf("not taken over and healed: %+v", p)
	}
	if p.Accepted == 0 || p.Reached != p.Accepted || p.Refused == 0 || len(p.Other) > 0 {
		t.Errorf("actions: %d asked, %d accepted (%d reached pbxsim), %d refused lease_stale, others %v: want some accepted within the grant, all of them reaching pbxsim, the later ones refused lease_stale",
			p.Asked, p.Accepted, p.Reached, p.Refused, p.Other)
	}
	if p.StepDown < 0 || p.StepDown >= p.Lease || p.StepDown >= p.Opened || p.LastAccepted >= p.StepDown {
		t.Errorf("stepped down at %v, last action accepted at %v, the other's lease at %v and AMI login at %v: want accepted < step-down < lease, login",
			p.StepDown, p.LastAccepted, p.Lease, p.Opened)
	}
	if p.NotLeader != 0 {
		t.Errorf("pbxsim got %d actions from %s after %s's login: %v", p.NotLeader, p.Cut, p.Leader, p.NotLeaderFirst)
	}
	if rep.Firm.Samples == 0 || rep.Firm.Mismatches != 0 {
		t.Errorf("firm mismatches while live: %+v, want 0 in some samples", rep.Firm)
	}
}
