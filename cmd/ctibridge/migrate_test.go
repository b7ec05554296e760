package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunMigrateSQLite(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) string { return map[string]string{"CTIBRIDGE_DATA_DIR": dir}[k] }
	var out bytes.Buffer
	if err := runMigrate(context.Background(), nil, env, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "sqlite "+filepath.Join(dir, "ctibridge.db")) || !strings.Contains(out.String(), "phonebook: applied [1]") {
		t.Fatalf("first run: %s", out.String())
	}
	out.Reset()
	if err := runMigrate(context.Background(), []string{"--db", "sqlite:" + filepath.Join(dir, "ctibridge.db")}, env, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "history: applied []") {
		t.Fatalf("second run applied again: %s", out.String())
	}
	if err := runMigrate(context.Background(), []string{"--db", "mysql://x"}, env, &out); err == nil {
		t.Fatal("mysql accepted")
	}
}
