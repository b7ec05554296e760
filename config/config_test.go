package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPrecedence: a flag beats the environment, which beats the file,
// which beats the default; Source says where each value came from.
func TestPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("a: file\nb: file\nc: file\n"), 0o600)
	var a, b, c, d string
	s := &Settings{}
	s.Str(&a, "a", "def", "")
	s.Str(&b, "b", "def", "")
	s.Str(&c, "c", "def", "")
	s.Str(&d, "d", "def", "")
	env := map[string]string{"CTIBRIDGE_A": "env", "CTIBRIDGE_B": "env"}
	if err := s.Parse("t", []string{"--config", file, "--a", "flag"}, func(k string) string { return env[k] }, io.Discard); err != nil {
		t.Fatal(err)
	}
	if a != "flag" || b != "env" || c != "file" || d != "def" {
		t.Errorf("a %s, b %s, c %s, d %s", a, b, c, d)
	}
	if s.Source("a") != "--a" || s.Source("b") != "CTIBRIDGE_B" || s.Source("c") != file+":3" || s.Source("d") != "" {
		t.Errorf("sources %q %q %q %q", s.Source("a"), s.Source("b"), s.Source("c"), s.Source("d"))
	}
}

// TestErrorsNameTheirSource: every bad value is reported, each an *Error
// saying where it was given.
func TestErrorsNameTheirSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("wait: soon\nnope: 1\n"), 0o600)
	var wait time.Duration
	s := &Settings{}
	s.Dur(&wait, "wait", time.Second, "")
	errs := s.ParseAll("t", []string{"--config", file}, func(string) string { return "" }, io.Discard)
	if len(errs) != 2 {
		t.Fatalf("%d errors: %v", len(errs), errs)
	}
	var bad, unknown *Error
	if !errors.As(errs[0], &bad) || bad.File != file || bad.Line != 1 || bad.Key != "wait" || bad.Err == nil {
		t.Errorf("bad value: %#v", errs[0])
	}
	if !errors.As(errs[1], &unknown) || !unknown.Unknown || unknown.Line != 2 {
		t.Errorf("unknown key: %#v", errs[1])
	}
}
