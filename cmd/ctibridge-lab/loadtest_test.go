package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A short e2e run through the command: pbxsim in a child process (this
// test binary, run as the command) or, --in-process, in this one, the
// bridge a ctibridge process either way, calls from the built-in phones
// (and from SIPp when installed), every call on every screen, no ghost,
// the hub's counters from the bridge's /metrics, its CPU, the JSON shape,
// the HTML report, and a profile of the bridge.
func TestLoadtestE2EShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pbxsim and a bridge")
	}
	t.Setenv("CTIBRIDGE_TEST_MAIN", "1") // for the child PBX process
	for _, gen := range []string{"phones", "phones-in-process", "sipp"} {
		t.Run(gen, func(t *testing.T) {
			if gen == "sipp" {
				if _, err := os.Stat("/usr/bin/sipp"); err != nil {
					t.Skip("sipp not installed")
				}
			}
			dir := t.TempDir()
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// A client a little behind sees only the latest state of an
			// extension (ws coalesces), so a short ring or talk could go
			// unseen on a loaded -race machine and count as a missing call
			// (a 300 ms talk did, about one run in ten): ring 400 ms, talk 1 s.
			args := []string{"e2e", "--generator", gen, "-r", "10", "-d", "2s", "--ring", "400ms", "--talk", "1s", "-c", "2", "--json",
				"--html", filepath.Join(dir, "r.html")}
			gen, inProcess := strings.CutSuffix(gen, "-in-process")
			args[2] = gen
			if inProcess {
				args = append(args, "--in-process")
			} else if gen == "phones" {
				args = append(args, "--profile", filepath.Join(dir, "prof"))
			}
			start := time.Now()
			err := runLoadtest(ctx, args, testEnv, &out, &errb)
			if err != nil {
				t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
			}
			if el := time.Since(start); el > 40*time.Second {
				t.Errorf("took %v", el)
			}
			var rep struct {
				Requests struct{ Total int }
				Counters map[string]int
			}
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			c := rep.Counters
			if rep.Requests.Total < 15 || c["calls_missing"] != 0 || c["ghost_calls"] != 0 || c["ghost_calls_rest"] != 0 || c["calls_failed"] != 0 {
				t.Errorf("report %s", out.String())
			}
			// Each answered call shows on each of the 2 screens in at
			// least its callee's ringing, connected and idle updates.
			if c["ws_messages_sent"] < 3*2*rep.Requests.Total || c["ws_writes"] == 0 || c["ws_bytes_sent"] < c["ws_messages_sent"] {
				t.Errorf("hub counters %v", c)
			}
			if _, ok := c["bridge_cpu_ms"]; !ok {
				t.Errorf("no bridge_cpu_ms: %v", c)
			}
			html, err := os.ReadFile(filepath.Join(dir, "r.html"))
			if err != nil || !bytes.Contains(html, []byte("<svg")) || bytes.Contains(html, []byte("http://")) && bytes.Contains(html, []byte("<script src")) {
				t.Errorf("html report: %v", err)
			}
			if gen == "phones" && !inProcess {
				for _, f := range []string{"cpu.pprof", "heap.pprof", "cpu-flame.svg"} {
					if _, err := os.Stat(filepath.Join(dir, "prof", f)); err != nil {
						t.Errorf("profile: %v (stderr %s)", err, errb.String())
					}
				}
			}
		})
	}
}

func TestLoadtestFlagsAndTargets(t *testing.T) {
	var out, errb bytes.Buffer
	env := func(string) string { return "" }
	if err := runLoadtest(context.Background(), []string{"http"}, env, &out, &errb); err == nil || !strings.Contains(err.Error(), "one URL") {
		t.Errorf("no URL: %v", err)
	}
	if err := runLoadtest(context.Background(), []string{"http", "ftp://x/"}, env, &out, &errb); err == nil || !strings.Contains(err.Error(), "bad URL") {
		t.Errorf("bad URL: %v", err)
	}
	if err := runLoadtest(context.Background(), []string{"nope"}, env, &out, &errb); err == nil {
		t.Error("unknown mode accepted")
	}
	// A refused connection with --max-errors 0 fails the run; the URL may
	// come before the flags.
	err := runLoadtest(context.Background(), []string{"http", "http://127.0.0.1:1/", "-d", "300ms", "-c", "1", "--max-errors", "0", "--json"}, env, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "targets missed") || !strings.Contains(out.String(), `"connection_refused"`) {
		t.Errorf("err %v, output %s", err, out.String())
	}
}
