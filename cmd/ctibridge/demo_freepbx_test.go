package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestDemoFreePBX runs `demo --pbx-plan freepbx` and checks through the
// REST API what the bridge shows of the FreePBX topologies: a call from
// Alice's second device 91201 is Alice's (201) with Carol 203, and a
// queue call from Alice answered through a Local member names the queue.
func TestDemoFreePBX(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: 4, ring: 100 * time.Millisecond, dataDir: t.TempDir(), plan: pbxsim.PlanFreePBX}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	var d demoInfo
	select {
	case d = <-info:
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	resp, err := http.Post(d.URL+"auth/login", "application/json", strings.NewReader(`{"username":"admin","password":"admin"}`))
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	type conv struct {
		CounterpartNum string
		Connected      bool
		ThroughQueue   bool
		QueueID        string
	}
	// waitConv polls the extensions until ext has a connected
	// conversation ok accepts.
	waitConv := func(what, ext string, ok func(conv) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			req, _ := http.NewRequest("GET", d.URL+"astproxy/extensions", nil)
			req.Header.Set("Authorization", "Bearer "+login.Token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var exts map[string]struct{ Conversations map[string]conv }
			json.Unmarshal(body, &exts)
			for _, cv := range exts[ext].Conversations {
				if cv.Connected && ok(cv) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen; last state %s", what, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	call, err := d.Phones["91201"].Call(cctx, "203")
	if err != nil {
		t.Fatal(err)
	}
	waitConv("201's call from its device 91201 to 203", "201", func(cv conv) bool { return cv.CounterpartNum == "203" })
	call.Hangup(cctx)
	call, err = d.Phones["201"].Call(cctx, pbxsim.DefaultFreePBXQueue)
	if err != nil {
		t.Fatal(err)
	}
	waitConv("a queue call answered through a Local member", "201", func(cv conv) bool {
		return (cv.CounterpartNum == "202" || cv.CounterpartNum == "203") && cv.QueueID == pbxsim.DefaultFreePBXQueue
	})
	call.Hangup(cctx)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo did not stop within 10 s of Ctrl-C")
	}
}
