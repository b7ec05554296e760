package main

// Helpers of the browser tests that drive the demo: start it, and read or
// act on the bridge over REST to check what the page shows.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startDemo runs the demo (pbxsim with phones simulated phones from 201,
// each answering after ring, no random traffic) until the test ends.
func startDemo(t *testing.T, phones int64, ring time.Duration) demoInfo {
	t.Helper()
	return startDemoWith(t, phones, ring, nil)
}

// startDemoWith is startDemo with more of the demo's settings (mod).
func startDemoWith(t *testing.T, phones int64, ring time.Duration, mod func(*demoConfig)) demoInfo {
	t.Helper()
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: phones, ring: ring, dataDir: t.TempDir()}
	if mod != nil {
		mod(&c)
	}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("demo did not stop")
		}
	})
	select {
	case d := <-info:
		return d
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	return demoInfo{}
}

// restGet reads a JSON document of the bridge as user token into v.
func restGet(t *testing.T, base, token, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", strings.TrimSuffix(base, "/")+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %s %s", path, res.Status, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// restExt is an extension as GET /astproxy/extension/{exten} has it.
type restExt struct {
	Exten, Status string
	DND           bool
	CF            string
	Conversations map[string]struct {
		ID, Direction, CounterpartNum, Recording string
		Connected                                bool
		Parked                                   *struct{ Parking, By string }
		Spy                                      *struct{ Exten, Mode string }
	}
}

func extOf(t *testing.T, base, token, exten string) restExt {
	t.Helper()
	var x restExt
	restGet(t, base, token, "/astproxy/extension/"+exten, &x)
	return x
}

// pollREST waits until cond holds of what GET path answers.
func pollREST[T any](t *testing.T, base, token, path, what string, cond func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var v T
		restGet(t, base, token, path, &v)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("REST %s: waited 10 s for %s; last: %+v", path, what, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postJSON posts body to the bridge as user token; the answer is ignored
// (for cleaning up between steps).
// postTo posts body to path under base as token's user, for its effect.
func postTo(t *testing.T, base, token, path, body string) {
	t.Helper()
	postJSON(t, strings.TrimSuffix(base, "/")+path, token, body, nil)
}
