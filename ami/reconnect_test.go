package ami

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestBackoffFastAfterDrop: after a connection that was up drops, waits
// stay under ReconnectFast for FastFor, then grow again; a refused login
// ends the fast phase at once; an overflow never starts it.
func TestBackoffFastAfterDrop(t *testing.T) {
	c := NewClient(Config{Rand: rand.New(rand.NewPCG(1, 2))})
	lost := errors.New("connection reset")
	refused := &ActionError{Action: "Login", Message: "Authentication failed"}
	maxOf := func(b *retryState, n int, loggedIn bool, err error, now time.Time) time.Duration {
		var worst time.Duration
		for range n {
			worst = max(worst, c.nextWait(b, loggedIn, err, now))
			loggedIn = false
		}
		return worst
	}
	t0 := time.Unix(1796028440, 0)

	var b retryState
	if w := maxOf(&b, 40, true, lost, t0); w > DefaultReconnectFast {
		t.Errorf("restarting PBX: waited up to %v, want <= %v", w, DefaultReconnectFast)
	}
	if w := maxOf(&b, 40, false, lost, t0.Add(DefaultFastFor+time.Second)); w <= DefaultReconnectFast {
		t.Errorf("after the fast phase: waits stayed <= %v", w)
	}

	b = retryState{}
	c.nextWait(&b, true, lost, t0)
	if w := maxOf(&b, 40, false, refused, t0.Add(time.Second)); w <= DefaultReconnectFast {
		t.Errorf("refused logins: waits stayed <= %v", w)
	}

	b = retryState{}
	if w := maxOf(&b, 40, true, errOverflow, t0); w <= DefaultReconnectFast {
		t.Errorf("overflow: waits stayed <= %v", w)
	}
}

// TestJunkLogRateLimited: first occurrence at once, then one line per
// period with the count, whatever the rate.
func TestJunkLogRateLimited(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1796028440, 0)
	l := newJunkLog(slog.New(slog.NewTextHandler(&out, nil)), time.Minute, func() time.Time { return now })
	for range 1000 {
		l.note(JunkGarbage, []byte("x\x00y"))
	}
	l.note(JunkLongLine, bytes.Repeat([]byte("z"), 500))
	now = now.Add(30 * time.Second)
	l.flush()
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("%d lines before the period is over:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), `sample="\"x\\x00y\""`) || !strings.Contains(out.String(), `zzz\"..."`) {
		t.Errorf("samples not quoted or not cut:\n%s", out.String())
	}
	now = now.Add(31 * time.Second)
	l.flush()
	l.flush()
	if got := out.String(); strings.Count(got, "\n") != 3 || !strings.Contains(got, "kind=garbage_line count=999 ") {
		t.Errorf("after the period:\n%s", got)
	}
}
