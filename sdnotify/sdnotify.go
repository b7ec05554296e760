package sdnotify

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// The states ctibridge sends (sd_notify(3)).
const (
	// Ready: start-up (or a reload) is finished.
	Ready = "READY=1"
	// Reloading: a reload began; send Ready when it is done.
	Reloading = "RELOADING=1"
	// Stopping: shutdown began.
	Stopping = "STOPPING=1"
)

// Notifier sends notifications to one socket. The zero value and nil are
// no-op notifiers.
type Notifier struct {
	// Immutable after New.
	addr *net.UnixAddr

	mu   sync.Mutex // guards conn
	conn *net.UnixConn
}

// New returns a notifier for socket, the value of $NOTIFY_SOCKET: a path,
// or an abstract socket name starting with "@". An empty socket gives a
// no-op notifier (not started by systemd, or NotifyAccess=none).
func New(socket string) *Notifier {
	if socket == "" {
		return &Notifier{}
	}
	name := socket
	if name[0] == '@' {
		name = "\x00" + name[1:] // Linux abstract namespace
	}
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// Enabled reports whether notifications go anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends the assignments (like Ready, or "STATUS=connecting") as
// one datagram. A value may not contain a newline: each assignment is
// one line.
func (n *Notifier) Notify(states ...string) error {
	if !n.Enabled() || len(states) == 0 {
		return nil
	}
	for _, s := range states {
		if !strings.Contains(s, "=") || strings.ContainsAny(s, "\n\x00") {
			return fmt.Errorf("sdnotify: bad assignment %q", s)
		}
	}
	msg := []byte(strings.Join(states, "\n"))
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		c, err := net.DialUnix("unixgram", nil, n.addr)
		if err != nil {
			return fmt.Errorf("sdnotify: %w", err)
		}
		n.conn = c
	}
	// systemd reads promptly; a deadline keeps a wedged receiver from
	// blocking the caller.
	n.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := n.conn.Write(msg); err != nil {
		// The socket may have been replaced (systemd re-executed): dial
		// again next time.
		n.conn.Close()
		n.conn = nil
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}

// Ready sends READY=1, with a STATUS line when status is not empty.
func (n *Notifier) Ready(status string) error { return n.Notify(withStatus(Ready, status)...) }

// Reloading sends RELOADING=1 with a monotonic timestamp (systemd 253+
// wants MONOTONIC_USEC with it for Type=notify-reload; older ones ignore
// it). Send Ready when the reload is over.
func (n *Notifier) Reloading(status string) error {
	var more []string
	if us, ok := monotonicUsec(); ok {
		more = append(more, fmt.Sprintf("MONOTONIC_USEC=%d", us))
	}
	return n.Notify(withStatus(Reloading, status, more...)...)
}

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping(status string) error { return n.Notify(withStatus(Stopping, status)...) }

// Status sends a free-form STATUS line for `systemctl status`.
func (n *Notifier) Status(status string) error { return n.Notify("STATUS=" + oneLine(status)) }

// Close releases the socket. Later calls dial again.
func (n *Notifier) Close() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return nil
	}
	err := n.conn.Close()
	n.conn = nil
	return err
}

func withStatus(state, status string, more ...string) []string {
	out := append([]string{state}, more...)
	if status != "" {
		out = append(out, "STATUS="+oneLine(status))
	}
	return out
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\x00", "").Replace(s)
}
