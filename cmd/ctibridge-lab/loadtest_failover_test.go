package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
)

// TestLoadtestFailoverShort: the failover scenario in short, as CI runs
// it: this package's binary built and run as two bridges and two edges on
// a 3-server NATS cluster, pbxsim with SIPp calls, a throwaway
// PostgreSQL, WebSocket clients of the admin and of two users limited to
// three extensions each on every edge; the plan: the leading bridge
// killed with SIGKILL, then a nats-server leading neither the op stream
// nor the lease bucket (dead 3 s), the leader again, then edge-1. Every invariant must hold (each
// kill taken over, no ghost or missing call once the edges are live
// again or the NATS server is back, the WebSocket clients resumed on the
// other edge, CDR rows equal to the calls completed, each once, no
// crash), with the edges live again within 10 s of each kill (the issue's
// 5 s p99 is reported: a race build on a loaded machine is not where to
// hold it), and the NATS and edge kills did what they should.
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
	dir, bin := t.TempDir(), testBin
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"failover", "--bin", bin, "--kills", "2", "--nats-kills", "1", "--nats-down", "3s", "--edge-kills", "1", "--settle", "1s",
		"--partitions", "-1", "--json", "--max-live", "10s", "--dir", filepath.Join(dir, "work"), "--keep"}
	var out, errb bytes.Buffer
	start := time.Now()
	err := runLoadtest(ctx, args, testEnv, &out, &errb)
	t.Logf("took %v", time.Since(start))
	type judged struct {
		GhostsStuck  int `json:"ghosts_stuck"`
		MissingStuck int `json:"missing_stuck"`
	}
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
		NATSKills []struct {
			Server  string
			Leads   []string
			ShownNS time.Duration `json:"shown_ns"`
			InStep  time.Duration `json:"in_step_ns"`
			judged
			StuckStale int `json:"stuck_stale"`
			After      judged
			Error      string
		} `json:"nats_kills"`
		EdgeKills []struct {
			Edge                       string
			Clients, Resumed, Compared int
			Lost                       int
			BackMoved                  int `json:"back_moved"`
			Answers, LostSeen          []string
			Error                      string
		} `json:"edge_kills"`
		Limited struct {
			Clients  int
			OwnFull  int `json:"own_full"`
			OwnBlank int `json:"own_blank"`
			Hidden   int
			Leaked   int
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
	t.Logf("NATS kills %+v; edge kills %+v; limited %+v", rep.NATSKills, rep.EdgeKills, rep.Limited)
	for _, c := range rep.Checks {
		t.Logf("%s = %s (pass %v)", c.Name, c.Value, c.Pass)
	}
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
	if err != nil {
		t.Fatalf("%v\nwork files: %s\nstderr: %s", err, filepath.Join(dir, "work"), errb.String())
	}
	if len(rep.Kills) != 2 || rep.Counters["failover.calls_successful"] == 0 || len(rep.Checks) < 20 {
		t.Errorf("the run did not do what it should: %s", out.String())
	}
	// The one NATS kill: a server leading neither the op stream nor the
	// lease bucket (no election on the way: the full run kills their
	// leaders too), new calls on both edges while it was dead, in step
	// once it was back, and no stale state shown as live meanwhile nor
	// after (a node that cannot hear its stream says its state is stale
	// on its own: bus/unheard.go; the report's invariants hold it too).
	if len(rep.NATSKills) != 1 {
		t.Fatalf("%d NATS kills, want 1", len(rep.NATSKills))
	}
	nk := rep.NATSKills[0]
	for _, s := range nk.Leads {
		if !strings.HasPrefix(s, "KV_") || s == "KV_"+bus.LeaseBucket {
			t.Errorf("the NATS server killed led %s: want one leading neither the op stream nor the lease bucket", s)
		}
	}
	if nk.ShownNS < 0 || nk.InStep < 0 || nk.Error != "" || nk.GhostsStuck+nk.MissingStuck+nk.After.GhostsStuck+nk.After.MissingStuck > 0 {
		t.Errorf("NATS kill: %+v, want calls shown while it was dead, then in step", nk)
	}
	// The edge kill: edge-1, with the admin's and the two limited users'
	// clients and the resume client (moved to edge-2 at the first
	// takeover, back to edge-1 at the second): all four resumed on edge-2,
	// each compared with its user's client there, nothing lost; the three
	// that belong to edge-1 moved back.
	if len(rep.EdgeKills) != 1 {
		t.Fatalf("%d edge kills, want 1", len(rep.EdgeKills))
	}
	ek := rep.EdgeKills[0]
	if ek.Edge != "edge-1" || ek.Clients != 4 || ek.Resumed != 4 || ek.Compared != 4 || ek.Lost != 0 || ek.BackMoved != 3 || ek.Error != "" {
		t.Errorf("edge kill: %+v, want edge-1's 4 clients resumed on edge-2, 4 compared, none lost, 3 moved back", ek)
	}
	// Two limited users on two edges: their own calls in full, nobody
	// else's numbers or channel names.
	if l := rep.Limited; l.Clients != 4 || l.OwnFull == 0 || l.OwnBlank != 0 || l.Hidden == 0 || l.Leaked != 0 {
		t.Errorf("limited users' clients: %+v, want 4, own calls in full, others' hidden, none leaked", l)
	}
}
