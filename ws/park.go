package ws

// Parking: a client that has nothing to send costs no goroutine. Once
// it has joined, and after each message it sends (the frames being read
// exactly, the reader then holds no byte of the next), its reader hands
// the connection to the hub's poller and ends; the poller, one goroutine
// waiting on an epoll set (Linux: park_linux.go), starts a reader again
// when the client's next bytes arrive, and a close (the token's expiry, a
// revocation, 4008, shutdown) or a failure starts one at once, to wait
// for the close reply or to clean up. No read is pending while the
// connection is parked, so no read deadline can drop a silent client:
// the hub's ping round drops a parked client it has not heard from for
// silentFor (twice the ping interval, 10 s and one heardStep). A
// connection that is not plain TCP (TLS), or any when the hub has no
// poller (other systems), keeps a reader goroutine blocked in a read,
// under the read deadline that extendRead pushes out.

// park hands c to the poller until its client sends something, from its
// reader between two messages; false when it cannot (no poller, not
// plain TCP, a close under way, the poller stopped or the socket closed):
// the reader then reads on, blocking.
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
// before it is dropped: twice the ping interval and silenceSlack, and
// one heardStep, as heard may be that much behind the client's last
// frame.
func (h *Hub) silentFor() int64 {
	d := int64(2*h.cfg.PingInterval + silenceSlack)
	return d + d/heardSteps
}

// heardSteps: the reader notes that a client was heard (conn.extendRead)
// at most heardSteps times per silence allowed: every 2.2 s by default.
const heardSteps = 32

// heardStep is the least time between two notes that a client was heard.
func (h *Hub) heardStep() int64 { return int64(2*h.cfg.PingInterval+silenceSlack) / heardSteps }

// forgetPolled ends c's registration with the poller, once its reader is
// done for good.
func (c *conn) forgetPolled() {
	if p := c.h.poll.Load(); p != nil {
		p.forget(c)
	}
}
