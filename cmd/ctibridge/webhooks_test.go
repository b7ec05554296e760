package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/webhook"
)

// TestCheckConfigWebhooks: a webhooks file with mistakes fails
// check-config (and so serve's start), naming each mistake; a good one
// passes.
func TestCheckConfigWebhooks(t *testing.T) {
	dir := t.TempDir()
	users := testUsersFile(t, dir)
	hooks := filepath.Join(dir, "webhooks.yaml")
	cfg := filepath.Join(dir, "ctibridge.yaml")
	os.WriteFile(cfg, []byte("ami-user: ctibridge\nusers: "+users+"\ndata-dir: "+dir+"\nwebhooks: "+hooks+"\n"), 0o640)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "s3cret"}

	os.WriteFile(hooks, []byte("webhooks:\n  - name: crm\n    url: crm.example.com/hook\n    secret: short\n    events: [rang]\n"), 0o640)
	out, err := checkConfig(t, env, "--config", cfg)
	if err == nil {
		t.Fatalf("no error; output:\n%s", out)
	}
	for _, want := range []string{`key "webhooks"`, `url: "crm.example.com/hook" is not an http(s) URL`,
		"secret: want at least 16 bytes", `unknown event "rang"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	os.WriteFile(hooks, []byte("webhooks:\n  - name: crm\n    url: https://crm.example.com/hook\n    secret: 0123456789abcdef0123\n"), 0o640)
	if out, err := checkConfig(t, env, "--config", cfg); err != nil {
		t.Fatalf("err = %v\n%s", err, out)
	}
}

// TestServeWebhooks: serve with --webhooks posts the signed cdr event of
// a call's Cdr once the recorder took it, and counts it in /metrics. (The
// call events from the engine's feed: TestDemoWebhooks, and package
// webhook with the engine fed whole recordings.)
func TestServeWebhooks(t *testing.T) {
	const secret = "0123456789abcdef0123"
	recv := newHookRecv(t, secret)
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.srv.URL+"/in\n    secret: "+secret+"\n")
	srv := amitest.NewServer(t)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": testUsersFile(t, t.TempDir())}
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--webhooks", hooks}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, logs}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs.String())
			}
		}
	}
	addrs, err := serveReady(logs, done, 30*time.Second)
	if err != nil {
		t.Fatalf("%v; logs:\n%s", err, logs.String())
	}
	admin := addrs.Admin
	for _, m := range amitest.ReadRecording(t, "../../ami/testdata/basic_call_caller_hangup.ami") {
		if m.Event() == "Cdr" {
			srv.Broadcast(m)
		}
	}
	waitUntil("the cdr event", func() bool {
		evs := recv.events()
		return len(evs) == 1 && evs[0].Type == webhook.TypeCDR && evs[0].Extension == ""
	})
	waitUntil("metrics", func() bool {
		_, m := get(t, "http://"+admin+"/metrics")
		return strings.Contains(m, `ctibridge_webhook_delivered_total{webhook="crm"} 1`) && strings.Contains(m, `ctibridge_webhook_queued{webhook="crm"} 0`)
	})
}

// TestDemoWebhooks: the demo's simulated PBX places real SIP calls; a
// receiver configured with --webhooks gets, signed, each call's ringing,
// answered and hangup from the engine's state and its CDR, every id once.
func TestDemoWebhooks(t *testing.T) {
	const secret = "0123456789abcdef0123"
	recv := newHookRecv(t, secret)
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.srv.URL+"\n    secret: "+secret+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0", phones: 4,
		callEvery: 300 * time.Millisecond, talk: time.Second, ring: 200 * time.Millisecond, dataDir: t.TempDir(), webhooks: hooks}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
	}()
	select {
	case <-info:
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	// A call complete at the receiver: ringing, answered and hangup of
	// one channel, and a CDR.
	complete := func() bool {
		events := recv.events()
		seen := map[string]map[string]bool{}
		cdr := false
		for _, e := range events {
			if e.Type == webhook.TypeCDR {
				cdr = true
				continue
			}
			if seen[e.UniqueID] == nil {
				seen[e.UniqueID] = map[string]bool{}
			}
			seen[e.UniqueID][e.Type] = true
		}
		for _, m := range seen {
			if m["ringing"] && m["answered"] && m["hangup"] && cdr {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !complete(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no complete call at the receiver; events: %+v", recv.events())
		}
	}
	events := recv.events()
	byID := map[string]int{}
	for _, e := range events {
		byID[e.ID]++
	}
	for id, n := range byID {
		if n > 1 {
			t.Errorf("%s received %d times", id, n)
		}
	}
	for _, e := range events {
		if e.Type == webhook.TypeRinging && (e.Number == "" || e.Extension == "") {
			t.Errorf("ringing without caller or extension: %+v", e)
		}
	}
	t.Logf("%d events", len(events))
}

// hookRecv is a webhook receiver that checks signatures and keeps the
// events with their bodies.
type hookRecv struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []hookGot
}

type hookGot struct {
	e    webhook.Event
	body string
}

func newHookRecv(t *testing.T, secret string) *hookRecv {
	r := &hookRecv{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Verify(secret, req.Header.Get(webhook.HeaderSignature), req.Header.Get(webhook.HeaderTimestamp), body, time.Now(), time.Minute); err != nil {
			t.Errorf("POST %s: %v", body, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e webhook.Event
		json.Unmarshal(body, &e)
		r.mu.Lock()
		r.got = append(r.got, hookGot{e, string(body)})
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// events are the events received, in order.
func (r *hookRecv) events() []webhook.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]webhook.Event, 0, len(r.got))
	for _, g := range r.got {
		out = append(out, g.e)
	}
	return out
}

// wait returns the first event match takes.
func (r *hookRecv) wait(t *testing.T, what string, match func(webhook.Event) bool) hookGot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r.mu.Lock()
		for _, g := range r.got {
			if match(g.e) {
				r.mu.Unlock()
				return g
			}
		}
		n := len(r.got)
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no webhook event %s among %d", what, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebhooksDrainOldDirs: a data dir left by the version before, whose
// bus nodes had a webhook service a named PBX (queues in
// <data-dir>/webhooks-<pbx>), holding an event the receiver never took:
// the one service of this version moves it into the webhook's queue in
// <data-dir>/webhooks, removes the old directory, and delivers it once,
// with its pbx, beside the new events.
func TestWebhooksDrainOldDirs(t *testing.T) {
	const secret = "0123456789abcdef0123"
	data := t.TempDir()
	site2 := calls.New(calls.Config{})
	// The earlier layout, its receiver unreachable.
	old, err := webhook.New(calls.New(calls.Config{}), []webhook.Config{{Name: "crm", URL: "http://127.0.0.1:1/in", Secret: secret}},
		webhook.Options{Dir: filepath.Join(data, "webhooks-site2"), PBXs: []webhook.PBX{{Name: "site2", State: site2}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); old.Run(ctx) }()
	old.CDRs([]history.CDR{{UniqueID: "site2:1796028439.12", LinkedID: "site2:1796028439.11", Sequence: 1, Src: "site2:201", Dst: "site2:202"}})
	cancel()
	<-done

	recv := newHookRecv(t, secret)
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.srv.URL+"/in\n    secret: "+secret+"\n")
	c := serveConfig{dataDir: data, webhooks: hooks}
	w, err := loadWebhooks(&c)
	if err != nil {
		t.Fatal(err)
	}
	def := calls.New(calls.Config{})
	if err := w.open(&c, []webhook.PBX{{State: def}, {Name: "site2", State: site2}}, nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "webhooks-site2")); !os.IsNotExist(err) {
		t.Fatalf("the old queue directory is left: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	c.cdrTaken([]history.CDR{{UniqueID: "1796028439.12", LinkedID: "1796028439.11", Sequence: 1, Src: "201", Dst: "202"}})
	for deadline := time.Now().Add(20 * time.Second); len(recv.events()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("received %+v, want the old queue's CDR and the new one", recv.events())
		}
	}
	time.Sleep(200 * time.Millisecond)
	evs := recv.events()
	if len(evs) != 2 || evs[0].PBX != "site2" || evs[0].UniqueID != "site2:1796028439.12" || evs[1].PBX != "" || evs[1].UniqueID != "1796028439.12" {
		t.Fatalf("received %+v", evs)
	}
}
