package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// synthReport runs `loadtest synth args... --json` and returns its report
// and its output, for the error messages.
func synthReport(t *testing.T, args ...string) (rep struct {
	Requests struct{ Total int }
	Counters map[string]int
}, out string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a bridge")
	}
	var stdout, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append(append([]string{"synth"}, args...), "--json")
	if err := runLoadtest(ctx, args, testEnv, &stdout, &errb); err != nil {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", err, stdout.String(), errb.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	return rep, stdout.String()
}

// A short synth run through the command: the synthetic AMI, a bridge in
// process following it, every call of the steady phase ringing and then
// connected on every screen, no ghost after the hangups, and the engine's
// figures read from the bridge's /metrics (a bridge that applied nothing,
// or metrics that went missing, leave them at zero).
func TestLoadtestSynthShort(t *testing.T) {
	rep, out := synthReport(t, "--exts", "60", "--calls", "20", "-r", "10", "--ring", "400ms", "-d", "2s", "-c", "2", "--rest-rate", "2")
	c := rep.Counters
	if rep.Requests.Total < 10 || c["calls_missing"] != 0 || c["ghost_calls"] != 0 || c["ghost_calls_rest"] != 0 {
		t.Errorf("calls: %s", out)
	}
	if c["calls_up_max"] < 20 || c["fill_events"] != 20*18 || c["fill_events_applied"] < c["fill_events"] ||
		c["events_applied"] == 0 || c["engine_ns_per_event"] == 0 || c["publish_us_per_batch"] == 0 && c["events_per_batch"] == 0 {
		t.Errorf("engine figures: %s", out)
	}
	if c["process_peak_rss_kb"] < 1<<10 { // a Go process holding a bridge is more than a MB
		t.Errorf("peak RSS %d kB: %s", c["process_peak_rss_kb"], out)
	}
}

// The same with the call centre's mix: queue calls, trunk calls both
// ways, transfers of both kinds and calls forwarded from the trunk to
// the trunk through a real bridge (its resync
// lists answered by the synthetic PBX), every kind placed, no ghost once
// all is hung up. The mix is drawn from the clock: each kind's share is
// large enough that a run of ~30 calls misses one about once in a
// thousand (a forward share of 0.1 missed about once in 25).
func TestLoadtestSynthMix(t *testing.T) {
	rep, out := synthReport(t, "--exts", "80", "--queues", "2", "--members", "6", "--calls", "20", "-r", "10", "--ring", "300ms", "-d", "3s",
		"--queue-share", "0.25", "--trunk-share", "0.2", "--transfer-share", "0.25", "--forward-share", "0.2", "-c", "2", "--rest-rate", "2")
	c := rep.Counters
	if c["ghost_calls"] != 0 || c["ghost_calls_rest"] != 0 || c["calls_missing"] != 0 {
		t.Errorf("ghosts or missing calls: %s", out)
	}
	for _, k := range []string{"internal", "trunk_in", "trunk_out", "queue", "blind_transfer", "attended_transfer", "forward"} {
		if c["calls_placed_"+k] == 0 {
			t.Errorf("no %s call placed: %s", k, out)
		}
	}
}
