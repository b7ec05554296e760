package amitest

import (
	"context"
	"testing"

	"github.com/ctibridge/ctibridge/ami/amiproxy"
)

// Proxy relays TCP connections to a server and can turn them half-open:
// Freeze makes every connection open at that moment swallow all bytes in
// both directions while keeping its sockets open, as a dead PBX host, a
// stuck Asterisk or a broken NAT does. Connections made after Freeze are
// relayed normally. It is an amiproxy.Proxy run for one test.
type Proxy struct {
	p *amiproxy.Proxy
}

// NewProxy listens on 127.0.0.1 and relays to target; it is closed at the
// end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := amiproxy.New(target, nil)
	if err != nil {
		t.Fatalf("amitest: proxy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &Proxy{p: p}
}

// Addr is the "host:port" to dial instead of the server's.
func (p *Proxy) Addr() string { return p.p.Addr() }

// Freeze turns every open connection half-open.
func (p *Proxy) Freeze() { p.p.Fault(amiproxy.HalfOpen) }
