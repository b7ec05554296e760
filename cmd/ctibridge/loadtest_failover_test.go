package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
)

// TestLoadtestFailoverShort: the failover scenario in short, as CI runs
// it: this package's binary built and run as two bridges and two edges on
// a 3-server NATS cluster, pbxsim with SIPp calls, a throwaway
// PostgreSQL; the leading bridge killed with SIGKILL three times. Every
// invariant must hold (each kill taken over, no ghost or missing call
// once the edges are live again, the WebSocket client resumed on the
// other edge, CDR rows equal to the calls completed, each once, no
// crash), with the edges live again within 10 s of each kill (the issue's
// 5 s p99 is reported: a race build on a loaded machine is not where to
// hold it).
func TestLoadtestFailoverShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nats-servers, pbxsim, SIPp, PostgreSQL and four ctibridge processes")
	}
	if _, err := exec.LookPath("sipp"); err != nil {
		t.Skip("sipp not installed (scripts/test.sh installs it)")
	}
	if err := natscluster.Installed(); err != nil {
		t.Skip(err)
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) == 0 {
		t.Skip("no PostgreSQL binaries")
	}
	dir, bin := buildSelf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"failover", "--bin", bin, "--kills", "3", "--json", "--max-live", "10s", "--dir", filepath.Join(dir, "work"), "--keep"}
	var out, errb bytes.Buffer
	start := time.Now()
	err := runLoadtest(ctx, args, func(string) string { return "" }, &out, &errb)
	t.Logf("took %v", time.Since(start))
	var rep struct {
		Checks []struct {
			Name, Value     string
			Pass, Invariant bool
		}
		Kills []struct {
			N         int
			LeaseNS   time.Duration `json:"lease_ns"`
			StalledNS time.Duration `json:"stalled_ns"`
			LiveNS    time.Duration `json:"live_ns"`
			Resume    string
			Wrong     []string
		}
		Counters map[string]float64
		Notes    []string
	}
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("%v (%v): %s\nstderr: %s", jerr, err, out.String(), errb.String())
	}
	for _, k := range rep.Kills {
		t.Logf("kill %d: lease %v, stalled %v, live %v, %s %v", k.N, k.LeaseNS, k.StalledNS, k.LiveNS, k.Resume, k.Wrong)
	}
	for _, c := range rep.Checks {
		t.Logf("%s = %s (pass %v)", c.Name, c.Value, c.Pass)
	}
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
	if err != nil {
		t.Fatalf("%v\nwork files: %s\nstderr: %s", err, filepath.Join(dir, "work"), errb.String())
	}
	if len(rep.Kills) != 3 || rep.Counters["failover.calls_successful"] == 0 || len(rep.Checks) < 10 {
		t.Errorf("the run did not do what it should: %s", out.String())
	}
}
