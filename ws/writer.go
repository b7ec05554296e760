package ws

import (
	"bufio"
	"errors"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
)

// Writing: a client's frames go out as soon as its socket is free. The
// first frame queued to an idle client hands it to its writer goroutine
// (direct.go), which writes what is queued without waiting; what the
// socket does not take, and every write to a connection that is not
// plain TCP (TLS), go to the connection's flusher goroutine, which
// writes it in one writev, waiting for the socket; frames queued while
// that write is in flight (or while the flusher waits for a CPU)
// coalesce in the queue and go out together in the next write, and the
// flusher ends when the queue is empty. So an idle client gets a change
// at once, a busy one gets batches as large as its backlog, and an idle
// connection holds no goroutine and no write buffer. No write carries a
// deadline: a flusher whose socket stays full is dropped by the hub's
// watchdog (watchdog.go). Under load the hub batches as well, across all
// clients (Config.WriteRate).

// kick hands c to its writer, or starts its flusher, unless it is being
// written or has ended; under c.mu.
func (c *conn) kick() {
	if c.writing || c.ended {
		return
	}
	c.writing = true
	c.flushers.Add(1)
	if c.raw != nil && c.h.writers.take(c) {
		return
	}
	c.handOff()
}

// batch is a write's scratch: a writer's own, or borrowed from batches
// for one flush, so idle connections hold none.
type batch struct {
	iov         [][]byte
	bufs        net.Buffers // what is left to write of iov
	c           *conn       // whose write: the watchdog drops it if it waits too long
	waited      bool        // the write waited for the socket (watchdog.go)
	writevState             // batch.writev's (writev_linux.go)
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// add appends q's frames and the close frame cf, if any, to b.iov: the
// messages they hold and when the oldest of them was queued.
func (b *batch) add(q []*frame, cf []byte) (msgs int, oldest int64) {
	oldest = math.MaxInt64
	for _, f := range q {
		if f == nil {
			continue
		}
		b.iov = append(b.iov, f.b)
		b.iov = append(b.iov, f.more...)
		msgs += f.msgs
		oldest = min(oldest, f.at)
	}
	if len(cf) > 0 {
		b.iov = append(b.iov, cf)
	}
	return msgs, oldest
}

// reset lets go of what the last write held.
func (b *batch) reset() {
	clear(b.iov)
	b.iov, b.bufs, b.c = b.iov[:0], nil, nil
}

// keepQueue is the largest queue capacity a connection keeps between
// batches; a burst's larger one is let go when the flusher ends.
const keepQueue = 64

// flush writes what a writer left (c.rest) and what is queued, again and
// again while more was queued meanwhile, and ends when the queue is
// empty, the connection fails or its close frame has gone out.
func (c *conn) flush() {
	defer c.flushers.Done()
	b := batches.Get().(*batch)
	defer func() {
		if cap(b.iov) <= 4*keepQueue {
			batches.Put(b)
		}
	}()
	for {
		c.mu.Lock()
		if c.ended || c.live == 0 && len(c.closing) == 0 && c.rest == nil {
			c.idle()
			c.mu.Unlock()
			return
		}
		q := c.takeQueue()
		cf := c.closing
		if len(cf) > 0 {
			c.closing = []byte{} // it goes out now
		}
		rest, closed := c.rest, c.restClose
		c.rest, c.restClose = nil, false
		c.mu.Unlock()

		ok := c.write(b, rest, q, cf)
		clear(q)
		c.mu.Lock()
		if c.spare == nil {
			c.spare = q[:0]
		}
		c.mu.Unlock()
		if !ok {
			return
		}
		if len(cf) > 0 || closed {
			c.closeSent()
		}
	}
}

// takeQueue takes what is queued for writing, under c.mu; the queue
// continues in the spare one.
func (c *conn) takeQueue() []*frame {
	q := c.q
	c.q, c.spare = c.spare, nil
	c.live = 0
	c.unindex()
	return q
}

// idle ends a flusher's (or a direct writer's) turn: nothing is queued,
// or the connection ended. It lets a burst's large queue and index go;
// under c.mu.
func (c *conn) idle() {
	c.writing = false
	c.rest = nil
	if cap(c.spare) > keepQueue {
		c.spare = nil
	}
	if cap(c.q) > keepQueue && c.live == 0 {
		c.q = nil
	}
	if !c.indexed {
		c.idx = nil
	}
}

// write sends rest (what a writer's write left), q's frames and the
// close frame cf, if any, in one writev, waiting for the socket; false
// when the connection failed (or the watchdog dropped it).
func (c *conn) write(b *batch, rest [][]byte, q []*frame, cf []byte) bool {
	b.iov = append(b.iov[:0], rest...)
	msgs, oldest := b.add(q, cf)
	if len(b.iov) == 0 {
		return true
	}
	b.bufs, b.c = b.iov, c
	n, err := c.nc.writeBuffers(b, c.raw)
	b.reset()
	c.h.m.wrote(msgs, n)
	if err != nil {
		c.fail("write_error") // "slow" when the watchdog closed it
		return false
	}
	c.checkLag(msgs, oldest, c.h.now())
	return true
}

// checkLag closes c with 4008 when the oldest of the msgs messages it
// was just sent had been queued longer than SlowTimeout at now (hub
// clock).
func (c *conn) checkLag(msgs int, oldest, now int64) {
	h := c.h
	if lag := now - oldest; msgs > 0 && lag > int64(h.cfg.SlowTimeout) {
		h.log.Warn("ws client too slow: closing", "user", c.user.Username, "remote", c.nc.RemoteAddr().String(),
			"lag_ms", lag/1e6)
		c.closeWith(CloseTooSlow, "too slow", "slow", false)
	}
}

// isTimeout reports a read deadline's error (the auth timeout), as net
// reports it or as a wrapping net.Conn (a listener's) may.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// lockedConn serialises writes, so that each holds whole frames: the
// writers' and the flusher's share the socket with the reader's reply to
// a client's close (clientClose) and the last reader's close frame
// (finish).
type lockedConn struct {
	net.Conn
	mu sync.Mutex
}

func (c *lockedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

// copyBufs are writeBuffers' copy buffers, borrowed for one write.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 0, copyChunk); return &b }}

// copyChunk is the most writeBuffers copies before a write: a TLS record's
// payload.
const copyChunk = 16 << 10

// writeBuffers writes b.bufs with one writev on a TCP connection (raw, its
// socket: batch.writev). Any other net.Conn (a listener's wrapper, TLS)
// would get one Write per buffer from net.Buffers, so small buffers are
// copied together into writes of up to copyChunk bytes, in a buffer
// borrowed for the call; large ones are written as they are. Those
// writes, which cannot tell when they wait, are under the watchdog
// whole.
func (c *lockedConn) writeBuffers(bt *batch, raw syscall.RawConn) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if raw != nil && haveWritev {
		return bt.writev(raw)
	}
	wd := &bt.c.h.stuck
	wd.wait(bt.c)
	defer wd.done(bt.c)
	b := &bt.bufs
	if _, ok := c.Conn.(*net.TCPConn); ok {
		return b.WriteTo(c.Conn)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := (*bp)[:0]
	var total int64
	put := func(p []byte) error {
		n, err := c.Conn.Write(p)
		total += int64(n)
		return err
	}
	for _, p := range *b {
		if len(buf)+len(p) > copyChunk && len(buf) > 0 {
			if err := put(buf); err != nil {
				return total, err
			}
			buf = buf[:0]
		}
		if len(p) >= copyChunk {
			if err := put(p); err != nil {
				return total, err
			}
			continue
		}
		buf = append(buf, p...)
	}
	if len(buf) > 0 {
		if err := put(buf); err != nil {
			return total, err
		}
	}
	*bp = buf[:0]
	return total, nil
}

// hijackWriter hands gorilla a lockedConn at the hijack.
type hijackWriter struct {
	http.ResponseWriter
	nc *lockedConn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.nc = &lockedConn{Conn: c}
	return w.nc, brw, nil
}
