package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "c.yaml", "ami: file:1\nami-user: fileuser\nami_secret: filesecret\nreconcile-every: 2m\nlog-level: debug\n")
	env := map[string]string{"CTIBRIDGE_AMI_USER": "envuser", "CTIBRIDGE_AMI": "env:2"}
	var c serveConfig
	err := serveSettings(&c).Parse("serve", []string{"--config", file, "--ami", "flag:3"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.ami != "flag:3" || c.amiUser != "envuser" || c.amiSecret != "filesecret" || c.reconcile != 2*time.Minute || c.logLevel != "debug" {
		t.Fatalf("got %+v", c)
	}
	if c.admin != "127.0.0.1:9090" {
		t.Fatalf("default lost: %q", c.admin)
	}
}

func TestConfigErrorsNameTheirSource(t *testing.T) {
	cases := []struct {
		name, file string
		args       []string
		env        map[string]string
		want       string
	}{
		{name: "unknown key", file: "ami: x\nami-usr: typo\n", want: `:2: unknown key "ami-usr"`},
		{name: "wrong type", file: "reconcile-every: soon\n", want: `key "reconcile-every": not a duration`},
		{name: "list value", file: "ami: [a, b]\n", want: `key "ami": want a single value`},
		{name: "bad env", env: map[string]string{"CTIBRIDGE_AMI_TLS": "maybe"}, want: "CTIBRIDGE_AMI_TLS: not a boolean"},
		{name: "bad flag", args: []string{"--record-max-bytes", "lots"}, want: "--record-max-bytes: not an integer"},
		{name: "missing file", args: []string{"--config", "/nonexistent/ctibridge.yaml"}, want: "no such file"},
		{name: "stray argument", args: []string{"extra"}, want: `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, "c.yaml", tc.file)}, args...)
			}
			var c serveConfig
			err := serveSettings(&c).Parse("serve", args, func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestReadmeConfigTable keeps the README's configuration table in step with
// the flags serve really has.
func TestReadmeConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var c serveConfig
	for _, row := range strings.Split(strings.TrimSpace(serveSettings(&c).MarkdownTable()), "\n")[2:] {
		if !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row:\n%s", row)
		}
	}
}

func TestParseQueueNumbers(t *testing.T) {
	got, err := parseQueueNumbers(" support=600, sales = 601 ")
	if err != nil || len(got) != 2 || got["support"] != "600" || got["sales"] != "601" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"support", "support=", "=600", "support=6a0", "support=600\r\nAction: Logoff"} {
		if _, err := parseQueueNumbers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
