package ami

import (
	"context"
	"time"
)

// keepAlive pings the server every PingInterval and drops the connection
// when a Ping goes unanswered for PingTimeout; when ctx ends it logs off.
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
			_, err := c.do(lctx, cn, NewAction("Logoff"))
			cancel()
			c.log.Info("ami logged off", "err", err)
			cn.fail(ErrConnectionLost)
			return
		case <-tick:
			pctx, cancel := context.WithTimeout(context.Background(), c.cfg.PingTimeout)
			_, err := c.do(pctx, cn, NewAction("Ping"))
			cancel()
			if err != nil && IsTimeout(err) {
				c.stats.pingFails.Add(1)
				c.log.Warn("ami ping unanswered: dropping connection", "timeout", c.cfg.PingTimeout)
				cn.fail(errPingTimeout)
				return
			}
		}
	}
}
