package ws

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"syscall"
)

// Direct writes: a fan-out to thousands of clients would otherwise start
// a flusher goroutine per client per change. Instead the hub hands the
// clients it queued to a few writer goroutines (GOMAXPROCS of them, each
// owning the clients whose slot falls to it), which copy each client's
// queued frames into one buffer and write it with one non-blocking write
// system call, with no goroutine, timer or deadline per client. A write
// the socket does not take whole (the client's receive window is full),
// a queue too large for the buffer or holding a snapshot's pieces, a
// close, and a connection that is not plain TCP (TLS) go to the
// connection's own flusher goroutine as before (writer.go), which waits
// for the socket with SlowTimeout: a slow client never holds up a writer,
// and the slow-client rules are the same on both paths.

// directMax is the most bytes a direct write copies; larger queues go to
// the flusher.
const directMax = 64 << 10

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
	h     *Hub
	wake  chan struct{}
	mu    sync.Mutex
	list  []*conn
	spare []*conn
	buf   []byte
	// The write in progress, for rawWrite (a method value made once: a
	// closure would allocate per write).
	fd    int
	cur   []byte
	wrote int
	err   error
	fn    func(uintptr)
	// Metrics of the current pass, added once per pass.
	msgs, writes int
	bytes        int64
}

func newWriters(h *Hub) *writers {
	n := runtime.GOMAXPROCS(0)
	ws := &writers{pending: make([][]*conn, n)}
	for range n {
		w := &dwriter{h: h, wake: make(chan struct{}, 1), buf: make([]byte, 0, directMax)}
		w.fn = w.rawWrite
		ws.ws = append(ws.ws, w)
	}
	return ws
}

// start runs the writers until the hub's Run returns.
func (ws *writers) start() {
	for _, w := range ws.ws {
		go w.run()
	}
}

// queue hands c to its writer once this fan-out dispatches, or to its
// flusher when it cannot be written directly; under c.mu, from the hub
// goroutine. Like kick, it does nothing while c is being written.
func (h *Hub) queue(c *conn) {
	if c.writing || c.ended {
		return
	}
	if c.raw == nil || c.closing != nil {
		c.kick()
		return
	}
	c.writing = true
	c.flushers.Add(1)
	ws := h.writers
	i := c.slot % len(ws.ws)
	ws.pending[i] = append(ws.pending[i], c)
	ws.n++
}

// dispatch hands what queue gathered to the writers; from the hub
// goroutine.
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
		select {
		case w.wake <- struct{}{}:
		default:
		}
		clear(p)
		ws.pending[i] = p[:0]
	}
	ws.n = 0
}

func (w *dwriter) run() {
	for {
		select {
		case <-w.wake:
		case <-w.h.done:
			// Run has returned: nothing more is handed over. What is
			// left goes to the flushers.
			w.mu.Lock()
			for _, c := range w.list {
				c.mu.Lock()
				c.handOff()
				c.mu.Unlock()
			}
			w.list = nil
			w.mu.Unlock()
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

// write sends what c has queued, or hands c to its flusher.
func (w *dwriter) write(c *conn) {
	c.mu.Lock()
	if c.ended || c.live == 0 && len(c.closing) == 0 && c.partial == nil {
		c.idle()
		c.mu.Unlock()
		c.flushers.Done()
		return
	}
	b, msgs, oldest, ok := w.gather(c)
	if !ok {
		c.handOff()
		c.mu.Unlock()
		return
	}
	q := c.takeQueue()
	c.mu.Unlock()
	clear(q)

	n, err := w.try(c, b)
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
	if n < len(b) {
		// The socket took part of it: the flusher writes the rest first,
		// waiting for the socket as long as SlowTimeout.
		c.partial = append([]byte(nil), b[n:]...)
		c.handOff()
		c.mu.Unlock()
		return
	}
	w.writes++
	w.msgs += msgs
	w.bytes += int64(n)
	more := c.live > 0 || len(c.closing) > 0
	if !more {
		c.idle()
	}
	c.mu.Unlock()
	if more {
		// More came meanwhile (a reply, a close): another turn, in
		// this writer's next pass.
		w.mu.Lock()
		w.list = append(w.list, c)
		w.mu.Unlock()
	} else {
		c.flushers.Done()
	}
	c.checkLag(msgs, oldest)
}

// gather copies c's queued frames into w.buf, under c.mu; false when they
// are not for a direct write.
func (w *dwriter) gather(c *conn) (b []byte, msgs int, oldest int64, ok bool) {
	if len(c.closing) > 0 || c.partial != nil {
		return nil, 0, 0, false
	}
	b, oldest = w.buf[:0], math.MaxInt64
	for _, f := range c.q {
		if f == nil {
			continue
		}
		if f.more != nil || len(b)+len(f.b) > directMax {
			return nil, 0, 0, false
		}
		b = append(b, f.b...)
		msgs += f.msgs
		oldest = min(oldest, f.at)
	}
	return b, msgs, oldest, true
}

// try writes b to c's socket without waiting: the bytes written and the
// error (EAGAIN when the socket took none). It gives up at once when
// another write holds the socket (a close reply).
func (w *dwriter) try(c *conn, b []byte) (int, error) {
	if !c.nc.mu.TryLock() {
		return 0, syscall.EAGAIN
	}
	defer c.nc.mu.Unlock()
	w.cur, w.wrote, w.err = b, 0, nil
	// Control, not Write: RawConn.Write fails once the write deadline a
	// flusher set has passed, and waits for the socket, which a direct
	// write must not.
	if err := c.raw.Control(w.fn); err != nil {
		return 0, err
	}
	n, err := w.wrote, w.err
	w.cur = nil
	return n, err
}

// handOff gives c, which a writer holds (writing set, one flushers count
// taken), to its flusher goroutine; under c.mu.
func (c *conn) handOff() {
	if c.flushFn == nil {
		c.flushFn = c.flush
	}
	go c.flushFn()
}
