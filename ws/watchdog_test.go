package ws

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestStuckWriteDropped: a client that stops reading while a snapshot
// larger than both sockets' buffers goes out is dropped by the watchdog
// once the write has waited SlowTimeout, not before, on a plain TCP
// connection (the flusher's writev) and on a wrapped one (net's writes),
// though no write carries a deadline.
func TestStuckWriteDropped(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprint("wrapped=", wrapped), func(t *testing.T) {
			const slow = 400 * time.Millisecond
			names := map[string]string{}
			for i := range 2000 {
				names[fmt.Sprint(1000+i)] = fmt.Sprintf("Agent %d %s", i, strings.Repeat("x", 100))
			}
			e := newEnv(t, calls.Config{Names: names}, auth.Config{}, Config{SlowTimeout: slow})
			if wrapped {
				e = e.wrapped()
			}
			nc := e.rawDial("root")
			serverFrame(t, nc) // hello
			c := e.connOf("root")
			sc := c.nc.Conn
			if w, ok := sc.(wrappedConn); ok {
				sc = w.Conn
			}
			if (c.raw == nil) != wrapped {
				t.Fatalf("raw socket %v on a wrapped=%v connection", c.raw != nil, wrapped)
			}
			// Small buffers at both ends: the snapshot (about 300 KB)
			// cannot fit in them.
			sc.(*net.TCPConn).SetWriteBuffer(4096)
			nc.(*net.TCPConn).SetReadBuffer(4096)
			start := time.Now()
			nc.Write(clientFrame(true, opText, []byte(`{"op":"subscribe","topics":["extensions"]}`), true))
			slowClosed := func() float64 { return testutil.ToFloat64(e.hub.m.closed.WithLabelValues("slow")) }
			for slowClosed() == 0 {
				if time.Since(start) > 20*slow {
					t.Fatal("the stuck client was never dropped")
				}
				time.Sleep(slow / 40)
			}
			t.Logf("dropped %v after the subscribe", time.Since(start))
			if d := time.Since(start); d < slow {
				t.Errorf("dropped %v after the subscribe, before SlowTimeout (%v)", d, slow)
			}
			// Its connection is gone: the client reads what was sent,
			// then the end.
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 64<<10)
			for {
				if _, err := nc.Read(buf); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						t.Fatal("the dropped client's socket is still open")
					}
					break
				}
			}
			e.hub.stuck.mu.Lock()
			left := len(e.hub.stuck.since)
			e.hub.stuck.mu.Unlock()
			if left != 0 {
				t.Errorf("%d writes left in the watchdog", left)
			}
		})
	}
}

// wrapped is e with its hub served through a listener whose connections
// are not *net.TCPConn (as TLS): no direct writes, no parking.
func (e *env) wrapped() *env {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := &http.Server{Handler: e.hub}
	go srv.Serve(wrappedListener{ln})
	e.t.Cleanup(func() { srv.Close() })
	w := *e
	w.url = "ws://" + ln.Addr().String() + "/ws"
	return &w
}
