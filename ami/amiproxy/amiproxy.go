package amiproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// The faults a Proxy injects into its live connections.
const (
	Kill     = "kill"     // close both sockets
	HalfOpen = "halfopen" // swallow every byte both ways, keep the sockets (even when the server closes its side)
	LongLine = "longline" // replace the server's stream with a header line that never ends
)

const (
	modeForward int32 = iota
	modeHalfOpen
	modeLongLine
)

// Proxy sits between an AMI client (the bridge) and a manager port. Each
// connection the client opens is forwarded to a new connection to the
// server until a fault is injected into it. With onMessage it parses
// what it forwards to the client (with the AMI reader) and hands over
// each message with the moment it was written to the client's socket.
type Proxy struct {
	// Immutable after New.
	ln        net.Listener
	upstream  string
	onMessage func(ami.Message, time.Time)

	mu      sync.Mutex // guards the fields below
	conns   map[*proxyConn]struct{}
	accepts []time.Time // when each connection was opened
	closes  []time.Time // when each was closed, by either side
}

// proxyConn is one bridge connection and its pbxsim peer.
type proxyConn struct {
	down, up net.Conn
	mode     atomic.Int32
	wmu      sync.Mutex // serialises writes to down
	closed   chan struct{}
	once     sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.closed)
		c.down.Close()
		c.up.Close()
	})
}

// New listens on 127.0.0.1 and will forward each connection to upstream
// once Run runs. onMessage, if not nil, is called on a goroutine of the
// connection's with every message forwarded to the client, in order, and
// when it was written (it must not block for long: the bytes wait in a
// pipe meanwhile).
func New(upstream string, onMessage func(m ami.Message, at time.Time)) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Proxy{ln: ln, upstream: upstream, onMessage: onMessage, conns: map[*proxyConn]struct{}{}}, nil
}

// Addr is the "host:port" to dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Run accepts and forwards until ctx ends, then closes every connection
// and returns once all its goroutines have stopped.
func (p *Proxy) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() {
		p.ln.Close()
		p.Cut()
	})
	defer stop()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() { p.serve(ctx, down) })
	}
}

// serve forwards one client connection until either side closes it (or,
// half-open, until the client does).
func (p *Proxy) serve(ctx context.Context, down net.Conn) {
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", p.upstream)
	if err != nil {
		down.Close()
		return
	}
	c := &proxyConn{down: down, up: up, closed: make(chan struct{})}
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.accepts = append(p.accepts, time.Now())
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.closes = append(p.closes, time.Now())
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	var tee *io.PipeWriter
	if p.onMessage != nil {
		pr, pw := io.Pipe()
		tee = pw
		wg.Go(func() { p.read(pr) })
	}
	wg.Go(func() {
		p.copyUp(c, tee)
		if tee != nil {
			tee.Close()
		}
		if c.mode.Load() == modeHalfOpen {
			<-c.closed // the client's socket stays open while it keeps it
		}
		c.close()
	})
	// client -> server: actions, swallowed while half-open.
	buf := make([]byte, 32<<10)
	for {
		n, err := down.Read(buf)
		if n > 0 && c.mode.Load() != modeHalfOpen {
			if _, werr := up.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.close()
	wg.Wait()
}

// copyUp forwards server -> client while the connection is healthy, and
// tees what it forwarded to the message reader, if any.
func (p *Proxy) copyUp(c *proxyConn, tee *io.PipeWriter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.up.Read(buf)
		if n > 0 && c.mode.Load() == modeForward {
			c.wmu.Lock()
			_, werr := c.down.Write(buf[:n])
			c.wmu.Unlock()
			if werr != nil {
				return
			}
			if tee != nil {
				tee.Write(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// read parses the stream forwarded to the client for onMessage.
func (p *Proxy) read(r io.Reader) {
	defer io.Copy(io.Discard, r) // never block the forwarder
	rd := ami.NewReader(bufio.NewReaderSize(r, 64<<10), ami.ReaderConfig{})
	if _, err := rd.ReadBanner(); err != nil {
		return
	}
	for {
		m, err := rd.ReadMessage()
		if err != nil {
			return
		}
		p.onMessage(m, time.Now())
	}
}

// Fault injects kind (Kill, HalfOpen, LongLine) into every live
// connection and returns how many it reached; connections opened later
// are forwarded normally.
func (p *Proxy) Fault(kind string) int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		switch kind {
		case Kill:
			c.close()
		case HalfOpen:
			c.mode.Store(modeHalfOpen)
		case LongLine:
			if c.mode.CompareAndSwap(modeForward, modeLongLine) {
				go longLine(c)
			}
		}
	}
	return len(conns)
}

// Cut closes every connection (a fault the client did not notice in
// time ends so).
func (p *Proxy) Cut() { p.Fault(Kill) }

// Accepted is the number of connections the client has opened.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepts)
}

// FirstAccept and FirstClose return when the first connection after t
// was opened, or closed (zero: none yet).
func (p *Proxy) FirstAccept(t time.Time) time.Time { return p.firstOf(&p.accepts, t) }
func (p *Proxy) FirstClose(t time.Time) time.Time  { return p.firstOf(&p.closes, t) }

func (p *Proxy) firstOf(ts *[]time.Time, t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range *ts {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

// longLine writes a header line that never ends to the client, 32 KB
// every 5 ms (6.4 MB/s), until the connection closes: a reader with a
// line limit must give up on it quickly; one without one stalls.
func longLine(c *proxyConn) {
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	c.wmu.Lock()
	c.down.Write([]byte("\r\nEvent: Newchannel\r\nChannel: "))
	c.wmu.Unlock()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		c.wmu.Lock()
		c.down.SetWriteDeadline(time.Now().Add(time.Second))
		_, err := c.down.Write(chunk)
		c.wmu.Unlock()
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			c.close()
			return
		}
	}
}
