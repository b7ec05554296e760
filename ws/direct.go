package ws

import (
	"errors"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Direct writes: a fan-out to thousands of clients would otherwise start
// a goroutine per client per change. Instead every write to a plain TCP
// connection (the fan-out's, and a reply's, a snapshot's or a close's
// from kick) goes through a few writer goroutines (GOMAXPROCS of them,
// each owning the connections whose conn.wid falls to it), which write
// each client's queued frames without waiting: one non-blocking writev of
// the shared frames (writev_linux.go; elsewhere a copy into one buffer
// and one write), with no goroutine, timer or deadline per client. What
// the socket does not take at once (the client's receive window is full,
// or a snapshot larger than the socket buffer), and every write to a
// connection that is not plain TCP (TLS), go to the connection's own
// flusher goroutine (writer.go), which waits for the socket under the
// hub's watchdog (watchdog.go): a slow client never holds up a writer,
// and the slow-client rules are the same on both paths.

// dispatchEvery: the fan-out hands its clients to the writers in groups
// of this many, so writing starts while it still queues.
const dispatchEvery = 256

// writers are the hub's writer goroutines.
type writers struct {
	ws      []*dwriter
	pending [][]*conn // per writer, filled by the hub goroutine
	n       int       // clients in pending
}

// dwriter is one writer goroutine and the clients handed to it.
type dwriter struct {
	h       *Hub
	wake    chan struct{}
	mu      sync.Mutex
	list    []*conn
	spare   []*conn
	stopped bool  // not running: kick starts a flusher goroutine instead; under mu
	b       batch // the write in progress (its iovecs, what the socket left)
	directState
	// Metrics of the current pass, added once per pass.
	msgs, writes int
	bytes        int64
	now          int64 // hub clock at the pass's start, for the lag check (one clock read per pass: one per write showed in the fan-out's profile)
}

func newWriters(h *Hub) *writers {
	n := runtime.GOMAXPROCS(0)
	ws := &writers{pending: make([][]*conn, n)}
	for range n {
		w := &dwriter{h: h, wake: make(chan struct{}, 1), stopped: true}
		ws.ws = append(ws.ws, w)
	}
	return ws
}

// start runs the writers until the hub's Run returns (h.done).
func (ws *writers) start() {
	for _, w := range ws.ws {
		w.mu.Lock()
		w.stopped = false
		w.mu.Unlock()
		go w.run()
	}
}

// of is the writer that owns c.
func (ws *writers) of(c *conn) *dwriter { return ws.ws[int(c.wid)%len(ws.ws)] }

// queue hands c to its writer once this fan-out dispatches, or to its
// flusher when it cannot be written directly; under c.mu, from the hub
// goroutine. Like kick, it does nothing while c is being written.
func (h *Hub) queue(c *conn) {
	if c.writing || c.ended {
		return
	}
	if c.raw == nil {
		c.kick()
		return
	}
	c.writing = true
	c.flushers.Add(1)
	ws := h.writers
	i := int(c.wid) % len(ws.ws)
	ws.pending[i] = append(ws.pending[i], c)
	ws.n++
}

// dispatch hands what queue gathered to the writers; from the hub
// goroutine, while the writers run.
func (ws *writers) dispatch() {
	if ws.n == 0 {
		return
	}
	for i, p := range ws.pending {
		if len(p) == 0 {
			continue
		}
		w := ws.ws[i]
		w.mu.Lock()
		w.list = append(w.list, p...)
		w.mu.Unlock()
		w.poke()
		clear(p)
		ws.pending[i] = p[:0]
	}
	ws.n = 0
}

// take hands c, whose write kick has just claimed (writing set, one
// flushers count taken), to its writer; under c.mu, from any goroutine.
// False when the writers do not run: then c needs a flusher.
func (ws *writers) take(c *conn) bool {
	w := ws.of(c)
	w.mu.Lock()
	ok := !w.stopped
	if ok {
		w.list = append(w.list, c)
	}
	w.mu.Unlock()
	if ok {
		w.poke()
	}
	return ok
}

// poke wakes the writer if it sleeps.
func (w *dwriter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *dwriter) run() {
	for {
		select {
		case <-w.wake:
		case <-w.h.done:
			// Run has returned: what is left, and every kick from now
			// on, goes to the flushers.
			w.mu.Lock()
			w.stopped = true
			list := w.list
			w.list = nil
			w.mu.Unlock()
			for _, c := range list {
				c.mu.Lock()
				c.handOff()
				c.mu.Unlock()
			}
			return
		}
		for {
			w.mu.Lock()
			list := w.list
			w.list, w.spare = w.spare, nil
			w.mu.Unlock()
			if len(list) == 0 {
				break
			}
			w.now = w.h.now()
			for _, c := range list {
				w.write(c)
			}
			if w.writes > 0 {
				w.h.m.wroteMany(w.writes, w.msgs, w.bytes)
				w.writes, w.msgs, w.bytes = 0, 0, 0
			}
			clear(list)
			w.mu.Lock()
			w.spare = list[:0]
			w.mu.Unlock()
		}
	}
}

// write sends what c has queued without waiting for its socket, and
// hands what the socket did not take to c's flusher.
func (w *dwriter) write(c *conn) {
	c.mu.Lock()
	if c.ended || c.live == 0 && len(c.closing) == 0 {
		c.idle()
		c.mu.Unlock()
		c.flushers.Done()
		return
	}
	q := c.takeQueue()
	cf := c.closing
	if len(cf) > 0 {
		c.closing = []byte{} // it goes out now
	}
	c.mu.Unlock()
	b := &w.b
	msgs, oldest := b.add(q, cf)
	clear(q)
	n, err := w.try(c)
	defer b.reset()
	if n > 0 {
		w.writes++
		w.msgs += msgs
		w.bytes += n
	}
	c.mu.Lock()
	if c.spare == nil {
		c.spare = q[:0]
	}
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		c.mu.Unlock()
		c.fail("write_error")
		c.flushers.Done() // writing stays set: no flusher starts on a failed connection
		return
	}
	if len(b.bufs) > 0 {
		// The socket took part of it: the flusher writes the rest
		// first, waiting for the socket under the watchdog.
		c.rest = append([][]byte(nil), b.bufs...)
		c.restClose = len(cf) > 0
		c.handOff()
		c.mu.Unlock()
		c.checkLag(msgs, oldest, w.now)
		return
	}
	more := c.live > 0 || len(c.closing) > 0
	if !more {
		c.idle()
	}
	c.mu.Unlock()
	if len(cf) > 0 {
		c.closeSent()
	}
	if more {
		// More came meanwhile (a reply, a close): another turn, in
		// this writer's next pass.
		w.mu.Lock()
		w.list = append(w.list, c)
		w.mu.Unlock()
	} else {
		c.flushers.Done()
	}
	c.checkLag(msgs, oldest, w.now)
}

// closeSent: the close frame is out; wait for the client's close reply,
// but not for long.
func (c *conn) closeSent() {
	c.nc.SetReadDeadline(time.Now().Add(c.h.cfg.CloseWait))
}

// handOff gives c, which a writer holds (writing set, one flushers count
// taken), to its flusher goroutine; under c.mu.
func (c *conn) handOff() {
	if c.flushFn == nil {
		c.flushFn = c.flush // made once: go c.flush() would allocate each time
	}
	go c.flushFn()
}
