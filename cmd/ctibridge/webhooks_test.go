package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
