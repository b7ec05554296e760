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
)

// TestDemo runs the demo as a user would: it comes up, phones call each
// other, an admin sees the calls through the REST API, and Ctrl-C stops
// everything promptly.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: 4, callEvery: 200 * time.Millisecond, talk: 2 * time.Second, ring: 100 * time.Millisecond, dataDir: t.TempDir()}
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

	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequest("GET", d.URL+"astproxy/extensions", nil)
		req.Header.Set("Authorization", "Bearer "+login.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var exts map[string]struct {
			Status        string
			Conversations map[string]struct{ Connected bool }
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(body, &exts)
		connected := 0
		for _, e := range exts {
			for _, cv := range e.Conversations {
				if cv.Connected {
					connected++
				}
			}
		}
		if len(exts) == 4 && connected >= 2 {
			break // a call is up, seen from both ends
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connected call seen; last state %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Do-not-disturb set through the API shows on the extension: the
	// simulator reports the custom device state as Asterisk would.
	req, _ := http.NewRequest("POST", d.URL+"astproxy/dnd", strings.NewReader(`{"endpointId":"204","activate":true}`))
	req.Header.Set("Authorization", "Bearer "+login.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST dnd = %d", resp.StatusCode)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequest("GET", d.URL+"astproxy/extension/204", nil)
		req.Header.Set("Authorization", "Bearer "+login.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var x struct{ DND bool }
		json.NewDecoder(resp.Body).Decode(&x)
		resp.Body.Close()
		if x.DND {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("204 never showed dnd after POST /astproxy/dnd")
		}
		time.Sleep(20 * time.Millisecond)
	}

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
