package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listen opens a unixgram socket like systemd's notify socket and returns
// its name and a function reading the next datagram.
func listen(t *testing.T, name string) func() string {
	t.Helper()
	addr := &net.UnixAddr{Name: name, Net: "unixgram"}
	if strings.HasPrefix(name, "@") {
		addr.Name = "\x00" + name[1:]
	}
	c, err := net.ListenUnixgram("unixgram", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func() string {
		t.Helper()
		buf := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
}

func TestNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	next := listen(t, sock)
	n := New(sock)
	defer n.Close()
	if !n.Enabled() {
		t.Fatal("not enabled")
	}

	if err := n.Ready("live: 12 extensions"); err != nil {
		t.Fatal(err)
	}
	if got, want := next(), "READY=1\nSTATUS=live: 12 extensions"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	if err := n.Reloading("reloading users"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(next(), "\n")
	if len(lines) != 3 || lines[0] != "RELOADING=1" || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") || lines[2] != "STATUS=reloading users" {
		t.Errorf("reloading: %q", lines)
	}
	us, err := strconv.ParseUint(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil || us == 0 {
		t.Errorf("MONOTONIC_USEC %q: %v", lines[1], err)
	}

	if err := n.Status("line one\nline two"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "STATUS=line one line two" {
		t.Errorf("status: %q", got)
	}
	if err := n.Stopping(""); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "STOPPING=1" {
		t.Errorf("stopping: %q", got)
	}
	if err := n.Notify("READY=1\nX=2"); err == nil {
		t.Error("an assignment with a newline was sent")
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	name := "@ctibridge-sdnotify-test-" + strconv.Itoa(os.Getpid())
	next := listen(t, name)
	n := New(name)
	defer n.Close()
	if err := n.Notify(Ready); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "READY=1" {
		t.Errorf("got %q", got)
	}
}

// TestNotifyRedials: when systemd's socket goes away and comes back (a
// daemon-reexec), the next notification reaches the new one.
func TestNotifyRedials(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	addr := &net.UnixAddr{Name: sock, Net: "unixgram"}
	c, err := net.ListenUnixgram("unixgram", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := New(sock)
	defer n.Close()
	if err := n.Notify(Ready); err != nil {
		t.Fatal(err)
	}
	c.Close()
	os.Remove(sock)
	if err := n.Status("nobody listens"); err == nil {
		t.Error("no error writing to a removed socket")
	}
	next := listen(t, sock)
	if err := n.Status("back"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "STATUS=back" {
		t.Errorf("got %q", got)
	}
}

func TestNoSocketIsNoOp(t *testing.T) {
	for _, n := range []*Notifier{New(""), nil, {}} {
		if n.Enabled() {
			t.Error("enabled without a socket")
		}
		if err := n.Ready("x"); err != nil {
			t.Error(err)
		}
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestMissingSocketIsAnError(t *testing.T) {
	n := New(filepath.Join(t.TempDir(), "absent"))
	if err := n.Notify(Ready); err == nil || !strings.HasPrefix(err.Error(), "sdnotify: ") {
		t.Errorf("err = %v", err)
	}
}
