package amitest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy relays TCP connections to a server and can turn them half-open:
// Freeze makes every connection open at that moment swallow all bytes in
// both directions while keeping its sockets open, as a dead PBX host, a
// stuck Asterisk or a broken NAT does. Connections made after Freeze are
// relayed normally.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []*proxyConn
	wg     sync.WaitGroup
	closed bool
}

type proxyConn struct {
	client, server net.Conn
	mu             sync.Mutex
	frozen         bool
}

// NewProxy listens on 127.0.0.1 and relays to target; it is closed at the
// end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("amitest: proxy: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the "host:port" to dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze turns every open connection half-open.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		c.frozen = true
		c.mu.Unlock()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			return
		}
		sv, err := net.Dial("tcp", p.target)
		if err != nil {
			cl.Close()
			continue
		}
		pc := &proxyConn{client: cl, server: sv}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cl.Close()
			sv.Close()
			return
		}
		p.conns = append(p.conns, pc)
		p.wg.Add(2)
		p.mu.Unlock()
		go func() { defer p.wg.Done(); pc.relay(sv, cl) }()
		go func() { defer p.wg.Done(); pc.relay(cl, sv) }()
	}
}

// relay copies src to dst until src ends, dropping what it reads while
// frozen.
func (pc *proxyConn) relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		pc.mu.Lock()
		frozen := pc.frozen
		pc.mu.Unlock()
		if n > 0 && !frozen {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF && !frozen {
				dst.Close()
			}
			return
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.client.Close()
		c.server.Close()
	}
	p.wg.Wait()
}
