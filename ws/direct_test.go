//go:build unix

package ws

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// directHub is a bare hub whose writers run (Run is not called).
func directHub(t testing.TB) *Hub {
	h := bareHub(t, calls.New(calls.Config{}), testUsers(t))
	h.writers.start()
	t.Cleanup(func() { close(h.done) }) // registered first: runs after the conns' cleanups
	return h
}

// pairConn is a subscribed conn of h over a loopback TCP pair, written
// directly, and the far end of its socket.
func pairConn(t testing.TB, h *Hub) (*conn, net.Conn) {
	t.Helper()
	near, far := tcpPair(t)
	u, _ := h.auth.(*auth.Service).Users().Lookup("root")
	c := &conn{h: h, nc: &lockedConn{Conn: near}, raw: rawConn(near), user: u, full: true, seesUnowned: true,
		topics: allTopics, subscribed: true, slot: len(h.clients)}
	h.clients = append(h.clients, c)
	t.Cleanup(func() { c.end(far) })
	return c, far
}

// sendDirect queues f to c as the fan-out does and waits until c is idle.
func (h *Hub) sendDirect(c *conn, f *frame) {
	c.mu.Lock()
	c.push(f)
	h.queue(c)
	c.mu.Unlock()
	h.writers.dispatch()
	c.flushers.Wait()
}

// TestDirectWrite: a frame queued by the fan-out reaches the client in a
// direct write (no flusher goroutine), whole.
func TestDirectWrite(t *testing.T) {
	h := directHub(t)
	c, far := pairConn(t, h)
	if c.raw == nil {
		t.Fatal("a TCP connection is not written directly")
	}
	want := textFrame([]byte(`{"op":"event","seq":1}`))
	h.sendDirect(c, &frame{b: want, seq: 1, ent: firstEnt, msgs: 1})
	got := make([]byte, len(want))
	far.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(far, got); err != nil || string(got) != string(want) {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	if c.writing || c.rest != nil {
		t.Errorf("after the write: writing %v, rest %d pieces", c.writing, len(c.rest))
	}
}

// TestKickWritesDirect: what the readers and the hub queue outside the
// fan-out (a reply, a snapshot in pieces, a close) is written by the
// connection's writer, with no flusher goroutine, whole and in order.
func TestKickWritesDirect(t *testing.T) {
	h := directHub(t)
	c, far := pairConn(t, h)
	reply := textFrame([]byte(`{"op":"pong"}`))
	snap := textFrame([]byte(`{"op":"snapshot","extensions":{"201":{},"202":{}}}`))
	cut := len(snap) - 12
	c.mu.Lock()
	c.push(&frame{b: reply, ent: entPong, msgs: 1, kind: frameReply})
	c.push(&frame{b: snap[:cut], more: [][]byte{snap[cut : cut+5], snap[cut+5:]}, msgs: 1, kind: frameSnapshot})
	c.kick()
	c.mu.Unlock()
	c.flushers.Wait()
	c.closeWith(CloseGoingAway, "bye", "shutdown", true)
	c.flushers.Wait()
	want := string(reply) + string(snap) + string(closeFrame(CloseGoingAway, "bye"))
	got := make([]byte, len(want))
	far.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(far, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushFn != nil {
		t.Error("a flusher goroutine was started for writes the socket took at once")
	}
	if c.writing || c.rest != nil {
		t.Errorf("after the writes: writing %v, rest %d pieces", c.writing, len(c.rest))
	}
}

// TestDirectPartialWrite: when the client's socket takes only part of a
// direct write, the flusher sends the rest before anything queued later,
// so the client reads every frame whole and in order.
func TestDirectPartialWrite(t *testing.T) {
	h := directHub(t)
	c, far := pairConn(t, h)
	pad := make([]byte, 16<<10)
	for i := range pad {
		pad[i] = 'x'
	}
	// Fill the socket (the far end reads nothing yet) until a write is
	// handed to the flusher.
	send := func(seq int) {
		p := fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, seq, pad)
		c.mu.Lock()
		c.push(&frame{b: textFrame(p), seq: uint64(seq), msgs: 1})
		h.queue(c)
		c.mu.Unlock()
		h.writers.dispatch()
	}
	n := 0
	for ; n < 10000; n++ {
		send(n + 1)
		time.Sleep(50 * time.Microsecond)
		c.mu.Lock()
		slow := c.writing && c.flushFn != nil
		c.mu.Unlock()
		if slow {
			n++
			break
		}
	}
	if n == 10000 {
		t.Fatal("the socket never filled")
	}
	for m := n; m < n+50; m++ { // and more while the flusher waits
		send(m + 1)
	}
	n += 50
	r := bufio.NewReader(far)
	far.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 1; i <= n; i++ {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if hdr[0] != 0x81 || hdr[1] != 126 {
			t.Fatalf("frame %d: header % x", i, hdr)
		}
		p := make([]byte, int(hdr[2])<<8|int(hdr[3]))
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want := fmt.Sprintf(`{"seq":%d,`, i); string(p[:len(want)]) != want {
			t.Fatalf("frame %d starts %q", i, p[:20])
		}
	}
	c.flushers.Wait()
}

// TestDirectWriteAllocs: a direct write to an idle client allocates
// nothing in the steady state.
func TestDirectWriteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	h := directHub(t)
	c, far := pairConn(t, h)
	go io.Copy(io.Discard, far)
	f := &frame{b: textFrame([]byte(`{"op":"event","seq":1}`)), seq: 1, ent: firstEnt, msgs: 1}
	h.sendDirect(c, f)
	if n := testing.AllocsPerRun(1000, func() { h.sendDirect(c, f) }); n > 0.05 {
		t.Errorf("a direct write allocates %.2f times", n)
	}
}

// BenchmarkFanoutSockets queues one change to N clients over loopback TCP
// (their far ends read by goroutines of this process) and waits until
// every write is done: direct writes, a flusher goroutine per client
// (the previous way; what TLS connections still get), and the floor, a
// bare loop writing the same bytes to every socket. Compare ns/client
// within one run.
func BenchmarkFanoutSockets(b *testing.B) {
	data := []byte(`{"exten":"201","name":"Alice Rossi","status":"busy","dnd":false,"cf":"","cfb":"","cfu":"","ip":"127.0.0.1","port":"5062","sipuseragent":"SIPp","chanType":"pjsip","context":"from-internal","conversations":{}}`)
	for _, n := range []int{1000, 5000} {
		for _, mode := range []string{"direct", "flusher", "floor"} {
			b.Run(fmt.Sprintf("clients=%d/%s", n, mode), func(b *testing.B) {
				h := directHub(b)
				for range n {
					c, far := pairConn(b, h)
					go io.Copy(io.Discard, far)
					if mode == "flusher" {
						c.raw = nil
					}
				}
				cs := []calls.Change{{Type: calls.ExtenUpdate, Key: "201", Data: data}}
				fb := eventFrame(&cs[0], data)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; b.Loop(); i++ {
					if mode == "floor" {
						for _, c := range h.clients {
							c.nc.Write(fb)
						}
						continue
					}
					cs[0].Seq = uint64(i + 1)
					h.fanout(cs)
					for _, c := range h.clients {
						c.flushers.Wait()
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
				// The process's CPU (the writes and the far ends' reads):
				// steadier than wall time on a shared machine.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/client")
			})
		}
	}
}

// processCPU is the CPU time this process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
