package ami

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Run connects, logs in and reads until ctx is done (or Close is called),
// reconnecting with backoff after any failure. It sends Logoff before
// leaving a live connection and returns ctx.Err(). Call it once.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("ami: run: already running")
	}
	defer close(c.runDone)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { // owned: ends when ctx ends, which the deferred cancel ensures
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	})

	var b retryState
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		loggedIn, err := c.runConn(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := c.nextWait(&b, loggedIn, err, time.Now())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// retryState is Run's memory between connection attempts.
type retryState struct {
	attempt   int       // failed attempts since the last good connection
	fastUntil time.Time // the PBX is likely restarting until then
	downSince time.Time // when the link was last lost (zero: never up)
	lastLog   time.Time // last "still disconnected" line
	lastErr   string
}

// stillDownEvery spaces the log lines of a PBX that stays unreachable.
const stillDownEvery = 30 * time.Second

// nextWait decides the pause before the next attempt after one that ended
// with err, and logs the outcome: every lost connection and every change
// of error at Warn, repeats of the same failure at most every 30 s.
func (c *Client) nextWait(b *retryState, loggedIn bool, err error, now time.Time) time.Duration {
	var ae *ActionError
	switch {
	case loggedIn && !errors.Is(err, errOverflow):
		// The link worked and dropped: Asterisk stopping, restarting or
		// a network fault. Start over, fast.
		b.attempt = 0
		if c.cfg.FastFor > 0 {
			b.fastUntil = now.Add(c.cfg.FastFor)
		}
	case loggedIn:
		// Overflow: reconnecting at once would overflow again.
		b.fastUntil = time.Time{}
	case errors.As(err, &ae):
		b.fastUntil = time.Time{} // it refuses us: back off in full
	}
	ceil := c.cfg.ReconnectMax
	if now.Before(b.fastUntil) {
		ceil = c.cfg.ReconnectFast
	}
	wait := c.backoff(b.attempt, ceil)
	b.attempt++

	msg := err.Error()
	switch {
	case loggedIn:
		b.downSince, b.lastLog, b.lastErr = now, now, msg
		c.log.Warn("ami disconnected", "err", err, "retry_in", wait)
	case msg != b.lastErr || now.Sub(b.lastLog) >= stillDownEvery:
		b.lastLog, b.lastErr = now, msg
		args := []any{"err", err, "attempts", b.attempt, "retry_in", wait}
		if !b.downSince.IsZero() {
			args = append(args, "down_for", now.Sub(b.downSince).Round(time.Millisecond))
		}
		c.log.Warn("ami connect failed", args...)
	default:
		c.log.Debug("ami connect failed", "err", err, "attempts", b.attempt, "retry_in", wait)
	}
	return wait
}

// backoff returns a wait drawn from [0, min(ceil, ReconnectMin*2^attempt)].
func (c *Client) backoff(attempt int, ceil time.Duration) time.Duration {
	d := c.cfg.ReconnectMin
	for i := 0; i < attempt && d < ceil; i++ {
		d *= 2
	}
	d = min(d, ceil)
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return time.Duration(c.cfg.Rand.Int64N(int64(d) + 1))
}
