package httpserve

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTP/1.1 pipelining, made to pay.
//
// net/http answers each request with its own write to the socket: after
// every response it flushes its 4 KiB buffer. A client that pipelines ten
// requests in one packet gets ten packets and the server makes ten write
// system calls, so pipelining makes net/http slower, not faster
// (docs/http-pipelining.md has the numbers).
//
// coalescingConn sits between net/http and the TCP connection and holds
// response bytes back until net/http goes back to the socket for more
// requests. net/http only reads the socket when its own request buffer is
// empty, so "a read of more than one byte" means "no pipelined request is
// left to answer": that is when the held responses are written, all in one
// system call. The 1-byte reads are net/http's background read (it watches
// for a closed connection while a handler runs) and are not a reason to
// flush.
//
// Liveness comes first, so the buffering steps aside whenever nobody would
// come back to read:
//   - a write that arrives while a read of more than one byte is blocked on
//     the socket goes straight out (HTTP/2 readers, hijacked connections
//     read from another goroutine);
//   - a connection that starts with the HTTP/2 preface (h2c with prior
//     knowledge) is never buffered;
//   - a hijacked connection (WebSocket) is switched off by the server's
//     ConnState hook before the handler gets it;
//   - a timer flushes anything held longer than flushAfter (a handler that
//     streams with http.Flusher and then waits);
//   - Close flushes first.
//
// A write larger than the free space is sent together with what is held,
// in one writev, without being copied.
//
// Deadlines are lazy: net/http sets the read deadline four to six times per
// request (header timeout, whole-request timeout, clear it for the
// background read, push it into the past to stop that read, clear it
// again, idle timeout) and the write deadline once; each is a runtime timer
// update. The conn records them and hands the socket only the one in force
// when it really reads or writes (or at once, when a read is blocked on
// the socket and must see it).
//
// net/http's background read (one byte, started as a handler runs, to see
// a client hang up) goes to the socket as it would without this conn: a
// client that closes its connection cancels the request's context. While
// it waits, a deadline set (net/http's abortPendingRead, in the past, once
// the handler is done) reaches the socket at once; writes are still held
// meanwhile, and flushed when net/http, that read ended, reads the socket
// for the next request.

const (
	// coalesceSize is the most a connection holds back. The buffer is taken
	// from a pool when the first byte is held and returned on flush, so idle
	// connections hold none.
	coalesceSize = 32 << 10
	// copyLimit: writes at least this large are not copied into the buffer
	// but written with it (writev).
	copyLimit = 8 << 10
	// flushAfter bounds how long bytes may be held when no read comes.
	flushAfter = 2 * time.Millisecond
)

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, coalesceSize); return &b }}

// h2Preface starts every HTTP/2 connection with prior knowledge (RFC 9113
// section 3.4).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// coalescingListener wraps accepted connections in coalescingConn.
type coalescingListener struct {
	net.Listener
}

// NewCoalescingListener returns a listener whose connections hold response
// bytes back until the server reads again (see pipeline.go). Serve it with
// an http.Server whose ConnState calls ConnStateHook, as New does.
// Do not put it under TLS: wrap plain TCP only.
func NewCoalescingListener(ln net.Listener) net.Listener { return coalescingListener{ln} }

func (l coalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &coalescingConn{Conn: c}, nil
}

// ConnStateHook switches buffering off on a connection as it is hijacked
// (the WebSocket handler then owns it) and chains to next when non-nil.
func ConnStateHook(next func(net.Conn, http.ConnState)) func(net.Conn, http.ConnState) {
	return func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			if cc, ok := c.(*coalescingConn); ok {
				cc.disable()
			}
		}
		if next != nil {
			next(c, s)
		}
	}
}

// coalescingConn holds written bytes until the next real read: see above.
type coalescingConn struct {
	net.Conn

	mu       sync.Mutex // guards all below; held during socket writes
	buf      *[]byte    // held bytes; nil when none
	off      bool       // write through: hijacked or HTTP/2
	sniffed  int        // bytes of the HTTP/2 preface matched so far; -1 once decided
	reading  bool       // a read of more than one byte is blocked on the socket
	bgRead   bool       // net/http's 1-byte background read is blocked on the socket
	timer    *time.Timer
	armed    bool
	iov      [2][]byte // scratch for writev, so it does not allocate
	flushErr error     // a write error met by a flush not made by Write

	rdl, wdl             time.Time // deadlines in force
	rdlSocket, wdlSocket time.Time // deadlines the socket has
}

// SetReadDeadline records t; the socket gets it at its next read, or now
// if a read is blocked on it.
func (c *coalescingConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl = t
	if c.reading || c.bgRead || c.off {
		return c.applyReadDeadline()
	}
	return nil
}

// SetWriteDeadline records t; the socket gets it at its next write.
func (c *coalescingConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	if c.off {
		return c.applyWriteDeadline()
	}
	return nil
}

func (c *coalescingConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *coalescingConn) applyReadDeadline() error {
	if c.rdl.Equal(c.rdlSocket) {
		return nil
	}
	c.rdlSocket = c.rdl
	return c.Conn.SetReadDeadline(c.rdl)
}

func (c *coalescingConn) applyWriteDeadline() error {
	if c.wdl.Equal(c.wdlSocket) {
		return nil
	}
	c.wdlSocket = c.wdl
	return c.Conn.SetWriteDeadline(c.wdl)
}

// Read flushes held responses before any read of more than one byte: the
// server has answered everything it had buffered and waits for the client.
func (c *coalescingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(p) > 1 && c.buf != nil {
		if err := c.flushLocked(); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	if err := c.applyReadDeadline(); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if len(p) > 1 {
		c.reading = true
	} else {
		c.bgRead = true
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reading, c.bgRead = false, false
	if c.sniffed >= 0 && n > 0 {
		c.sniff(p[:n])
	}
	c.mu.Unlock()
	return n, err
}

// sniff looks for the HTTP/2 preface at the start of the connection.
func (c *coalescingConn) sniff(p []byte) {
	want := h2Preface[c.sniffed:]
	k := min(len(p), len(want))
	if !bytes.Equal(p[:k], want[:k]) {
		c.sniffed = -1
		return
	}
	c.sniffed += k
	if c.sniffed == len(h2Preface) {
		c.off = true
		c.sniffed = -1
	}
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushErr != nil {
		return 0, c.flushErr
	}
	if c.off || c.reading {
		if c.buf == nil {
			if err := c.applyWriteDeadline(); err != nil {
				return 0, err
			}
			return c.Conn.Write(p)
		}
		return c.writevLocked(p)
	}
	if len(p) < copyLimit {
		if c.buf == nil {
			c.buf = coalescePool.Get().(*[]byte)
			c.arm()
		}
		if len(*c.buf)+len(p) <= coalesceSize {
			*c.buf = append(*c.buf, p...)
			return len(p), nil
		}
	}
	if c.buf == nil {
		if err := c.applyWriteDeadline(); err != nil {
			return 0, err
		}
		return c.Conn.Write(p)
	}
	return c.writevLocked(p)
}

// writevLocked writes the held bytes and p in one system call and empties
// the buffer. It returns how much of p was written.
func (c *coalescingConn) writevLocked(p []byte) (int, error) {
	held := len(*c.buf)
	if err := c.applyWriteDeadline(); err != nil {
		c.release()
		return 0, err
	}
	c.iov[0], c.iov[1] = *c.buf, p
	bufs := net.Buffers(c.iov[:])
	n, err := bufs.WriteTo(c.Conn)
	c.iov[0], c.iov[1] = nil, nil
	c.release()
	if err != nil {
		return max(0, int(n)-held), err
	}
	return len(p), nil
}

// flushLocked writes the held bytes.
func (c *coalescingConn) flushLocked() error {
	if c.buf == nil {
		return nil
	}
	if err := c.applyWriteDeadline(); err != nil {
		c.release()
		return err
	}
	_, err := c.Conn.Write(*c.buf)
	c.release()
	return err
}

func (c *coalescingConn) release() {
	if c.armed {
		c.timer.Stop()
		c.armed = false
	}
	*c.buf = (*c.buf)[:0]
	coalescePool.Put(c.buf)
	c.buf = nil
}

func (c *coalescingConn) arm() {
	if c.timer == nil {
		c.timer = time.AfterFunc(flushAfter, c.timedFlush)
	} else {
		c.timer.Reset(flushAfter)
	}
	c.armed = true
}

func (c *coalescingConn) timedFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return // flushed meanwhile
	}
	c.armed = false
	if err := c.flushLocked(); err != nil {
		c.flushErr = err
	}
}

// disable flushes and makes every later write go straight out.
func (c *coalescingConn) disable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
	if err := c.flushLocked(); err != nil {
		c.flushErr = err
	}
	c.applyReadDeadline()
	c.applyWriteDeadline()
}

// Close flushes, then closes.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	c.off = true
	c.flushLocked()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite flushes, then half-closes (net/http calls it on a TCPConn
// before closing, to let the client read the last response).
func (c *coalescingConn) CloseWrite() error {
	c.mu.Lock()
	err := c.flushLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
