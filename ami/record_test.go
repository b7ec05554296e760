package ami

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecorderScrubsSplitSecrets(t *testing.T) {
	in := "Action: Login\r\nUsername: u\r\nSecret: hunter2\r\nsecret:x\r\n\r\n" +
		"Action: Login\r\nAuthType: md5\r\nKEY: 0123abcd\nKeyboard: stays\r\nMonkey: stays\r\n\r\n"
	want := "Action: Login\r\nUsername: u\r\nSecret: ***\r\nsecret: ***\r\n\r\n" +
		"Action: Login\r\nAuthType: md5\r\nKEY: ***\nKeyboard: stays\r\nMonkey: stays\r\n\r\n"
	// Every way of splitting the input in two writes, and byte by byte.
	for cut := 0; cut <= len(in); cut++ {
		got := record(t, []string{in[:cut], in[cut:]})
		if got != want {
			t.Fatalf("cut at %d:\n%q\nwant\n%q", cut, got, want)
		}
	}
	parts := strings.Split(in, "")
	if got := record(t, parts); got != want {
		t.Fatalf("byte by byte:\n%q", got)
	}
}

func record(t *testing.T, writes []string) string {
	t.Helper()
	dir := t.TempDir()
	r, err := NewRotatingRecorder(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if n, err := r.Write([]byte(w)); err != nil || n != len(w) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRecorderRotatesAtFrames(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRotatingRecorder(dir, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	// Every file in the same second; frames of 60 bytes.
	r.now = func() time.Time { return tick }
	frame := "Event: VarSet\r\nVariable: X\r\nValue: " + strings.Repeat("v", 20) + "\r\n\r\n"
	for range 5 {
		r.Write([]byte(frame[:10]))
		r.Write([]byte(frame[10:]))
	}
	r.NewConn()
	r.Write([]byte("Asterisk Call Manager/11.0.0\r\n"))
	r.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.ami"))
	want := []string{"ami-20261130-080000.ami", "ami-20261130-080000-1.ami", "ami-20261130-080000-2.ami", "ami-20261130-080000-3.ami"}
	if len(files) != len(want) {
		t.Fatalf("files = %v", files)
	}
	for i, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 2 && string(b) != frame+frame:
			t.Errorf("%s = %q, want two whole frames", name, b)
		case i == 2 && string(b) != frame:
			t.Errorf("%s = %q, want one frame", name, b)
		case i == 3 && !strings.HasPrefix(string(b), "Asterisk"):
			t.Errorf("%s = %q, want the new connection", name, b)
		}
	}
}
