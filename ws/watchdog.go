package ws

import (
	"sync"
	"time"
)

// The watchdog: no write carries a deadline (a SetWriteDeadline per write
// cost the fan-out a timer update per client). The writers never wait
// for a socket; a flusher's write registers here when it starts waiting
// for a full one (its client is not reading), and a goroutine that Run
// starts checks about ten times per SlowTimeout: a write that has waited
// longer than SlowTimeout has its connection dropped (closing the socket
// ends the write), as the deadline did. Not in Run's own loop: waking it
// for nothing would count as a wait for the write budget while a
// fan-out's wake-ups are still being paid for. A write that does not wait costs nothing here; one that
// waits, two lock operations.
type watchdog struct {
	mu    sync.Mutex
	since map[*conn]int64 // hub clock when the write began to wait
}

// wait registers c's write, which waits for the socket.
func (w *watchdog) wait(c *conn) {
	now := c.h.now()
	w.mu.Lock()
	if w.since == nil {
		w.since = map[*conn]int64{}
	}
	w.since[c] = now
	w.mu.Unlock()
}

// done: c's write no longer waits.
func (w *watchdog) done(c *conn) {
	w.mu.Lock()
	delete(w.since, c)
	w.mu.Unlock()
}

// watchEvery is how often the watchdog looks for stuck writes.
func (h *Hub) watchEvery() time.Duration {
	return min(max(h.cfg.SlowTimeout/10, time.Millisecond), time.Second)
}

// watchStuck drops stuck writes until Run returns.
func (h *Hub) watchStuck() {
	tick := time.NewTicker(h.watchEvery())
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			h.dropStuck()
		case <-h.done:
			return
		}
	}
}

// dropStuck drops the connections whose write has waited longer than
// SlowTimeout.
func (h *Hub) dropStuck() {
	now := h.now()
	w := &h.stuck
	var stuck []*conn
	w.mu.Lock()
	for c, t := range w.since {
		if now-t > int64(h.cfg.SlowTimeout) {
			stuck = append(stuck, c)
			delete(w.since, c)
		}
	}
	w.mu.Unlock()
	for _, c := range stuck {
		user := "" // a close before authentication can wait too
		if c.user != nil {
			user = c.user.Username
		}
		h.log.Warn("ws client too slow: dropped", "user", user, "remote", c.nc.RemoteAddr().String())
		c.fail("slow")
	}
}
