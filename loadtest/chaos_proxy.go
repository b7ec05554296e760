package loadtest

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

// The faults the AMI proxy injects into the bridge's live connections.
const (
	faultKill     = "kill"     // close both sockets
	faultHalfOpen = "halfopen" // swallow every byte both ways, keep the sockets
	faultLongLine = "longline" // replace pbxsim's stream with a line that never ends
)

const (
	modeForward int32 = iota
	modeHalfOpen
	modeLongLine
)

// amiProxy sits between the bridge and pbxsim's manager port. Each
// connection the bridge opens is forwarded to a new connection to pbxsim
// until a fault is injected into it. It reads the Cdr events it forwards
// to the bridge (with the AMI reader), so the db scenario knows which
// call records a bridge was given and when.
type amiProxy struct {
	// Immutable after newAMIProxy.
	ln       net.Listener
	upstream string

	mu      sync.Mutex // guards the fields below
	conns   map[*proxyConn]struct{}
	cdrs    []cdrSeen
	accepts []time.Time // when each connection was opened
	closes  []time.Time // when each was closed, by either side
}

// cdrSeen is one Cdr event forwarded to a bridge.
type cdrSeen struct {
	uniqueid string
	at       time.Time // when it was handed to the bridge's socket
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

func newAMIProxy(upstream string) (*amiProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &amiProxy{ln: ln, upstream: upstream, conns: map[*proxyConn]struct{}{}}, nil
}

func (p *amiProxy) addr() string { return p.ln.Addr().String() }

// run accepts and forwards until ctx ends, then closes every connection
// and returns once all its goroutines have stopped.
func (p *amiProxy) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() {
		p.ln.Close()
		p.cut()
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

// serve forwards one bridge connection until either side closes it.
func (p *amiProxy) serve(ctx context.Context, down net.Conn) {
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
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.closes = append(p.closes, time.Now())
		p.mu.Unlock()
	}()
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.readCdrs(pr) })
	wg.Go(func() {
		defer c.close()
		defer pw.Close()
		p.copyUp(c, pw)
	})
	// bridge -> pbxsim: actions, swallowed while half-open.
	buf := make([]byte, 32<<10)
	for {
		n, err := down.Read(buf)
		if n > 0 && c.mode.Load() != modeHalfOpen {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyUp forwards pbxsim -> bridge while the connection is healthy, and
// tees what it forwarded into the Cdr reader.
func (p *amiProxy) copyUp(c *proxyConn, tee io.Writer) {
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
			tee.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// readCdrs parses the stream forwarded to the bridge and notes every Cdr.
func (p *amiProxy) readCdrs(r io.Reader) {
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
		if m.Event() == ami.EventCdr {
			p.mu.Lock()
			p.cdrs = append(p.cdrs, cdrSeen{uniqueid: m.Get("UniqueID"), at: time.Now()})
			p.mu.Unlock()
		}
	}
}

// fault injects kind into every live connection and returns how many it
// reached.
func (p *amiProxy) fault(kind string) int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		switch kind {
		case faultKill:
			c.close()
		case faultHalfOpen:
			c.mode.Store(modeHalfOpen)
		case faultLongLine:
			if c.mode.CompareAndSwap(modeForward, modeLongLine) {
				go longLine(c)
			}
		}
	}
	return len(conns)
}

// cut closes every connection (a fault the bridge did not notice in
// time ends so).
func (p *amiProxy) cut() { p.fault(faultKill) }

// accepted is the number of connections the bridge has opened.
func (p *amiProxy) accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepts)
}

// firstAccept and firstClose return when the first connection after t
// was opened, or closed (zero: none yet).
func (p *amiProxy) firstAccept(t time.Time) time.Time { return p.firstOf(&p.accepts, t) }
func (p *amiProxy) firstClose(t time.Time) time.Time  { return p.firstOf(&p.closes, t) }

func (p *amiProxy) firstOf(ts *[]time.Time, t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range *ts {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

// cdrsSeen returns the Cdr events forwarded so far.
func (p *amiProxy) cdrsSeen() []cdrSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cdrSeen(nil), p.cdrs...)
}

// longLine writes a header line that never ends to the bridge, 32 KB
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
