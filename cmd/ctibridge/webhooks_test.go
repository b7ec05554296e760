package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami/amitest"
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
// call events from the engine's feed are proven in package webhook, with
// the engine fed whole recordings.)
func TestServeWebhooks(t *testing.T) {
	const secret = "0123456789abcdef0123"
	var mu sync.Mutex
	var types []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header.Get(webhook.HeaderSignature), r.Header.Get(webhook.HeaderTimestamp), body, time.Now(), time.Minute); err != nil {
			t.Errorf("POST %s: %v", body, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e webhook.Event
		json.Unmarshal(body, &e)
		mu.Lock()
		types = append(types, e.Extension+" "+e.Type)
		mu.Unlock()
	}))
	defer recv.Close()
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.URL+"/in\n    secret: "+secret+"\n")
	srv := amitest.NewServer(t)
	admin, api := freeAddr(t), freeAddr(t)
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": testUsersFile(t, t.TempDir())}
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", admin, "--http", api,
		"--data-dir", t.TempDir(), "--webhooks", hooks}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, args, func(k string) string { return env[k] }, nil, io.Discard, logs) }()
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
	waitUntil("ready", func() bool { code, _ := get(t, "http://"+admin+"/readyz"); return code == http.StatusOK })
	for _, m := range amitest.ReadRecording(t, "../../ami/testdata/basic_call_caller_hangup.ami") {
		if m.Event() == "Cdr" {
			srv.Broadcast(m)
		}
	}
	waitUntil("the cdr event", func() bool { mu.Lock(); defer mu.Unlock(); return len(types) == 1 && types[0] == " cdr" })
	waitUntil("metrics", func() bool {
		_, m := get(t, "http://"+admin+"/metrics")
		return strings.Contains(m, `ctibridge_webhook_delivered_total{webhook="crm"} 1`) && strings.Contains(m, `ctibridge_webhook_queued{webhook="crm"} 0`)
	})
}
