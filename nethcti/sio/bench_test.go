package sio

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/ws"
)

// BenchmarkFanoutSockets sends one change (an extension's device state:
// one extenUpdate, the extension no user's, so nothing else) to N clients
// over loopback and waits until every client has read it; the clients
// are goroutines of this process reading their websocket (and answering
// engine.io's pings). "ws" is the native hub (GET /ws, subscribed to
// extensions), "sio" this server; both read the same engine. cpu-ns/client
// is the process's CPU per delivered change (the writes, and the reads of
// the clients): the figure to compare within one run.
func BenchmarkFanoutSockets(b *testing.B) {
	for _, n := range []int{1000} {
		for _, mode := range []string{"ws", "sio"} {
			b.Run(fmt.Sprintf("clients=%d/%s", n, mode), func(b *testing.B) {
				e := newEnv(b, Config{})
				var got atomic.Int64
				var wg sync.WaitGroup
				dial := e.dialSio
				if mode == "ws" {
					dial = e.wsDialer(b)
				}
				conns := make([]*websocket.Conn, n)
				for i := range conns {
					conns[i] = dial(b)
					wg.Go(func() { countEvents(conns[i], &got) })
				}
				b.Cleanup(func() {
					for _, c := range conns {
						c.Close()
					}
					wg.Wait()
				})
				busy := false
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU()
				var want int64
				for b.Loop() {
					busy = !busy
					e.apply(devState("299", busy))
					want += int64(n)
					for got.Load() < want {
						time.Sleep(50 * time.Microsecond)
					}
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/client")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
			})
		}
	}
}

// dialSio opens a socket.io client logged in as root: it returns when
// authe_ok is in.
func (e *env) dialSio(b testing.TB) *websocket.Conn {
	u := "ws" + strings.TrimPrefix(e.http.URL, "http") + "/api/ws/?EIO=4&transport=websocket"
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, open, _ := conn.ReadMessage() // open
	conn.WriteMessage(websocket.TextMessage, []byte("40"))
	_, joined, _ := conn.ReadMessage() // connected
	conn.WriteMessage(websocket.TextMessage, []byte(`42["login",{"accessKeyId":"root","token":"`+e.token("root")+`"}]`))
	for {
		_, m, err := conn.ReadMessage()
		if err != nil {
			b.Fatalf("%s %s: %v", open, joined, err)
		}
		if strings.HasPrefix(string(m), `42["authe_ok"`) {
			return conn
		}
	}
}

// wsDialer serves the native hub on the env's engine and returns a dialer
// of clients subscribed to extensions: each returns when its snapshot is
// in.
func (e *env) wsDialer(b *testing.B) func(testing.TB) *websocket.Conn {
	h, err := ws.NewHub(e.eng, e.auth, ws.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		cancel()
		<-done
		h.Close()
		srv.Close()
	})
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	return func(b testing.TB) *websocket.Conn {
		conn, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + e.token("root")}})
		if err != nil {
			b.Fatal(err)
		}
		conn.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","topics":["extensions"]}`))
		for {
			_, m, err := conn.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if strings.Contains(string(m), `"op":"snapshot"`) {
				return conn
			}
		}
	}
}

// countEvents reads conn until it ends, counting the events (socket.io's
// or /ws's) and answering engine.io's pings.
func countEvents(conn *websocket.Conn, got *atomic.Int64) {
	buf := make([]byte, 4096)
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return
		}
		n, err := r.Read(buf)
		switch {
		case n == 1 && buf[0] == '2':
			conn.WriteMessage(websocket.TextMessage, []byte("3"))
		case n > 3 && (string(buf[:3]) == `42[` || strings.Contains(string(buf[:min(n, 40)]), `"op":"event"`)):
			got.Add(1)
		}
		for err == nil {
			_, err = r.Read(buf)
		}
	}
}

// processCPU is the CPU time this process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkProject projects one extension's change (in a call: the
// NethCTI shape made once per class) to N clients that keep nothing (no
// sockets): the fan-out's own cost per change.
func BenchmarkProject(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			h := newHarness(b)
			for _, m := range loadRecording(b, "basic_call_caller_hangup") {
				h.eng.Apply(m)
				if x := h.eng.Publish().Extensions.Get("201"); len(x.Conversations) > 0 && x.Status == "busy" {
					break // 201 talks to 202
				}
			}
			h.s.pump(h.eng.Feed())
			for c := range h.got {
				h.s.remove(c)
			}
			users := h.users.All()
			for i := range n {
				c := h.addClient(users[i%len(users)])
				c.sink = func(*packet) {}
			}
			b.ReportAllocs()
			b.ResetTimer()
			busy := false
			for b.Loop() {
				busy = !busy
				h.eng.Apply(devState("201", busy))
				h.eng.Publish()
				h.s.pump(h.eng.Feed())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
		})
	}
}
