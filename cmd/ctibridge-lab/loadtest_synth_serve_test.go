package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// `loadtest synth --serve-ami` serves the synthetic PBX to a bridge it did
// not start: the bridge (started here on the printed address) shows every
// stamped callee ringing, after its stamp; the stamps are one per call of
// the steady phase; at the end every call is hung up and the bridge shows
// none.
func TestLoadtestSynthServeAMI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bridge")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stamps := filepath.Join(t.TempDir(), "stamps")
	pr, pw := io.Pipe()
	var errb strings.Builder
	done := make(chan error, 1)
	go func() {
		args := []string{"synth", "--serve-ami", "127.0.0.1:0", "--stamps", stamps, "--exts", "40", "--calls", "6", "-r", "4", "--ring", "600ms", "-d", "4s"}
		err := runLoadtest(ctx, args, testEnv, pw, &errb)
		pw.CloseWithError(err)
		done <- err
	}()
	out := bufio.NewReader(pr)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("%v; stderr: %s", err, errb.String())
	}
	f := strings.Fields(first) // synthetic AMI on ADDR (...
	if len(f) < 4 || !strings.HasPrefix(first, "synthetic AMI on ") {
		t.Fatalf("first line: %q", first)
	}
	addr := f[3]
	var rest string
	var restMu sync.Mutex
	go func() { b, _ := io.ReadAll(out); restMu.Lock(); rest = string(b); restMu.Unlock() }()

	seen := map[string]time.Time{} // callee -> first seen ringing
	var watched time.Time          // from when the bridge is ready and polled
	err = withBridge(ctx, testBridgeRun, addr, synthUser, synthSecret, nil, func(b testBridge) error {
		watched = time.Now()
		for {
			select {
			case err := <-done:
				done <- err
				return nil
			default:
			}
			for x, st := range extensionStatuses(t, b) {
				if (st == "ringing" || st == "busy_ringing") && seen[x].IsZero() {
					seen[x] = time.Now()
				}
			}
			time.Sleep(40 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("%v; stderr: %s", err, errb.String())
	}
	restMu.Lock()
	summary := rest
	restMu.Unlock()
	var sum struct{ Calls, Skipped int }
	if err := json.Unmarshal([]byte(strings.TrimSpace(summary)), &sum); err != nil {
		t.Fatalf("summary %q: %v", summary, err)
	}
	data, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if sum.Calls < 8 || len(lines) != sum.Calls {
		t.Fatalf("%d calls placed (%d skipped), %d stamps:\n%s", sum.Calls, sum.Skipped, len(lines), data)
	}
	earliest := map[string]time.Time{} // callee -> its first stamp
	for _, l := range lines {
		x, ns, _ := strings.Cut(l, " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			t.Fatalf("stamp %q: %v", l, err)
		}
		if st := time.Unix(0, n); earliest[x].IsZero() || st.Before(earliest[x]) {
			earliest[x] = st
		}
	}
	var last time.Time
	for _, st := range earliest {
		if st.After(last) {
			last = st
		}
	}
	checked := 0
	for x, st := range earliest {
		if st.Before(watched) || st.After(last.Add(-time.Second)) {
			continue // placed before the bridge was up, or in the last second: hung up, maybe before a poll saw it ring
		}
		checked++
		if seen[x].IsZero() {
			t.Errorf("stamped callee %s never seen ringing on the bridge (seen %v)", x, seen)
		} else if seen[x].Before(st) {
			t.Errorf("callee %s seen ringing at %v, before its first stamp %v", x, seen[x], st)
		}
	}
	if checked < 3 {
		t.Errorf("only %d calls placed while the bridge was watched", checked)
	}
}

// extensionStatuses is the bridge's extensions' status by number.
func extensionStatuses(t *testing.T, b testBridge) map[string]string {
	t.Helper()
	req, _ := http.NewRequest("GET", b.http+"/astproxy/extensions", nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var exts map[string]struct{ Status string }
	if err := json.NewDecoder(res.Body).Decode(&exts); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for x, e := range exts {
		out[x] = e.Status
	}
	return out
}
