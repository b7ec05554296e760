package ami

import (
	"context"
	"sync"
	"time"
)

// keepAlive pings the server every PingInterval: a Ping unanswered after
// PingLate reports LinkStalled (LinkResumed if the answer comes after all),
// one unanswered after PingTimeout drops the connection. Each answer pushes
// the read-idle deadline back. When ctx ends it logs off. It also flushes
// the rate-limited log of malformed input.
func (c *Client) keepAlive(ctx context.Context, cn *conn) {
	var tick <-chan time.Time
	if c.cfg.PingInterval > 0 {
		t := time.NewTicker(c.cfg.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-cn.done:
			return
		case <-ctx.Done():
			// Say goodbye, briefly: Asterisk answers and closes the socket.
			lctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.ActionTimeout, time.Second))
			_, err := c.do(lctx, cn, NewAction(ActionLogoff))
			cancel()
			c.log.Info("ami logged off", "err", err)
			cn.fail(ErrConnectionLost)
			return
		case <-tick:
			c.junk.flush()
			if !c.ping(cn) {
				return
			}
		}
	}
}

// ping sends one Ping and waits for its answer; it reports false when the
// connection is over.
func (c *Client) ping(cn *conn) bool {
	var (
		mu      sync.Mutex
		over    bool // ping returned: the timer must not report anything
		stalled bool
	)
	sent := time.Now()
	late := time.AfterFunc(c.cfg.PingLate, func() {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return
		}
		stalled = true
		c.stats.latePings.Add(1)
		c.log.Warn("ami ping late: state may be stale", "late_after", c.cfg.PingLate)
		c.push(Event{Link: LinkStalled}, true)
	})
	pctx, cancel := context.WithTimeout(context.Background(), c.cfg.PingTimeout)
	_, err := c.do(pctx, cn, NewAction(ActionPing))
	cancel()
	late.Stop()
	mu.Lock()
	over = true
	wasStalled := stalled
	mu.Unlock()
	switch {
	case err == nil:
		rtt := time.Since(sent)
		c.stats.pingRTT.Store(int64(rtt))
		c.extendIdle(cn)
		if wasStalled {
			c.log.Info("ami ping answered late: link resumed", "rtt", rtt)
			c.push(Event{Link: LinkResumed}, true)
		}
		return true
	case IsTimeout(err):
		c.stats.pingFails.Add(1)
		c.log.Warn("ami ping unanswered: dropping connection", "timeout", c.cfg.PingTimeout)
		cn.fail(errPingTimeout)
		return false
	}
	// An error answer still proves the link is alive; a lost connection
	// is reported by the reader.
	select {
	case <-cn.done:
		return false
	default:
		c.extendIdle(cn)
		return true
	}
}

// extendIdle sets the read-idle deadline: nothing read (not even a Ping's
// answer) for idleTimeout drops the connection, even if a Ping cannot be
// written or the keep-alive is stuck.
func (c *Client) extendIdle(cn *conn) {
	if c.cfg.PingInterval > 0 {
		cn.nc.SetReadDeadline(time.Now().Add(c.idleTimeout()))
	}
}

// idleTimeout is a backstop behind the Ping timeout, which normally fires
// first: one more PingInterval of slack.
func (c *Client) idleTimeout() time.Duration {
	return 2*c.cfg.PingInterval + c.cfg.PingTimeout
}
