package ws

// Parking: a client that has nothing to send costs no goroutine. Once a
// reader has served a message (and, the frames being read exactly, holds
// no byte of the next), it hands its connection to the hub's poller and
// ends; the poller, one goroutine waiting on an epoll set (Linux), starts
// a reader again when the client's next bytes arrive, and a close (the
// token's expiry, a revocation, 4008, shutdown) or a failure starts one at
// once, to wait for the close reply or to clean up. While parked the
// connection has no read deadline to drop a silent client: the hub's ping
// round drops a parked client it has not heard from for twice the ping
// interval plus 10 s. A connection that is not plain TCP (TLS), or a hub
// without a poller (other systems), keeps its reader goroutine blocked in
// a read, as before.

// park hands c to the poller until its client sends something, from its
// reader between two messages; false when it cannot (no poller, not
// plain TCP, a close under way): the reader then reads on, blocking.
func (c *conn) park() bool {
	p := c.h.poll.Load()
	if p == nil || c.raw == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing != nil || !p.arm(c) {
		return false
	}
	c.parked = true
	return true
}

// wake starts a reader for c if it is parked; under c.mu.
func (c *conn) wake() {
	if c.parked {
		c.parked = false
		go c.turn()
	}
}

// turn is a reader's turn on a connection the poller woke: it serves
// messages until it parks again or the connection ends.
func (c *conn) turn() {
	if !c.serveMessages(true) {
		c.finish(true)
	}
}

// silentFor is how long a client may send nothing (no message, no pong)
// before it is dropped.
func (h *Hub) silentFor() int64 { return int64(2*h.cfg.PingInterval + silenceSlack) }

// forgetPolled ends c's registration with the poller, once its reader is
// done for good.
func (c *conn) forgetPolled() {
	if p := c.h.poll.Load(); p != nil {
		p.forget(c)
	}
}
