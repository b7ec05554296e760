package ws

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestIdleDeliveryImmediate: to a client with nothing in flight every
// change goes out in a write of its own, without waiting for any batch;
// a client whose write is in flight gets what was queued meanwhile in
// one more write; and a connection that has nothing to write holds no
// flusher and no large buffers.
func TestIdleDeliveryImmediate(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{PingInterval: time.Hour})
	c := e.dial("root")
	expectOp(t, c, "hello")
	c.Subscribe("extensions", "trunks")
	var m mirror
	m.apply(t, expectOp(t, c, "snapshot"))
	srv := e.connOf("root")
	writes := func() int { return int(testutil.ToFloat64(e.hub.m.writes)) }
	// settled waits for the flusher to end, so its write is counted.
	settled := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			srv.mu.Lock()
			busy := srv.writing
			srv.mu.Unlock()
			if !busy {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the flusher never ended")
			}
		}
	}
	settled()

	w0 := writes()
	for i := range 20 {
		s := e.apply(devState(fmt.Sprint(200+i), true))
		m.readUntil(t, c, s.Seq)
		settled()
	}
	if got := writes() - w0; got != 20 {
		t.Errorf("20 changes to an idle client took %d writes, want 20", got)
	}

	// A burst while a write is stuck: hold the socket, let the flusher
	// take the first change (it blocks writing it), queue 99 more,
	// release: two writes in all. The first is applied alone: an engine
	// faster than the hub's wake-up would otherwise hand all 100 to the
	// first write.
	w0 = writes()
	srv.nc.mu.Lock()
	waitConn := func(what string, cond func() bool) {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			srv.mu.Lock()
			ok := cond()
			srv.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				srv.nc.mu.Unlock()
				t.Fatal(what)
			}
		}
	}
	last := e.apply(devState("300", true)).Seq
	waitConn("the flusher never took the first change", func() bool { return srv.writing && srv.live == 0 })
	for i := 1; i < 100; i++ {
		last = e.apply(devState(fmt.Sprint(300+i), true)).Seq
	}
	waitConn("the changes were never queued", func() bool {
		n := len(srv.q)
		return n > 0 && srv.q[n-1] != nil && srv.q[n-1].seq == last
	})
	srv.nc.mu.Unlock()
	n0 := len(m.seqs)
	m.readUntil(t, c, last)
	settled()
	if got, events := writes()-w0, len(m.seqs)-n0; events != 100 || got > 2 {
		t.Errorf("a burst of 100 changes while a write was in flight: %d events in %d writes, want 100 in at most 2", events, got)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.writing || srv.idx != nil || cap(srv.q) > keepQueue || cap(srv.spare) > keepQueue {
		t.Errorf("an idle connection holds: flusher %v, index %v, queue %d, spare %d", srv.writing, srv.idx != nil, cap(srv.q), cap(srv.spare))
	}
	if testutil.ToFloat64(e.hub.m.paced) != 0 {
		t.Error("the fan-out waited for its budget with one client")
	}
}

// TestFanoutPaced: past Config.WriteRate the hub batches changes across
// clients: far fewer writes than events, and every client still ends
// with the engine's state.
func TestFanoutPaced(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{WriteRate: 100, PingInterval: time.Hour})
	var cs []*Client
	var ms []*mirror
	for range 2 {
		c := e.dial("root")
		expectOp(t, c, "hello")
		c.Subscribe("extensions", "trunks")
		m := &mirror{}
		m.apply(t, expectOp(t, c, "snapshot"))
		cs, ms = append(cs, c), append(ms, m)
	}
	w0 := testutil.ToFloat64(e.hub.m.writes)
	var s *calls.Snapshot
	for i := range 400 {
		s = e.apply(devState(fmt.Sprint(200+i), true))
		if i%20 == 19 {
			// Changes keep coming while the clients' budget runs: a
			// Publish no longer takes long enough to space them.
			time.Sleep(2 * time.Millisecond)
		}
	}
	events := 0
	for i, c := range cs {
		ms[i].readUntil(t, c, s.Seq)
		checkMirror(t, ms[i], s, nil)
		events += len(ms[i].seqs)
	}
	writes := int(testutil.ToFloat64(e.hub.m.writes) - w0)
	t.Logf("400 changes to 2 clients: %d events in %d writes, %v paced fan-outs", events, writes, testutil.ToFloat64(e.hub.m.paced))
	if events != 800 || writes > events/4 {
		t.Errorf("%d events in %d writes: want 800 in at most 200", events, writes)
	}
	if testutil.ToFloat64(e.hub.m.paced) == 0 {
		t.Error("the fan-out never waited for its budget")
	}
}

// loopConn is a conn of a bare hub over a loopback TCP pair whose far end
// is read and discarded.
func loopConn(t testing.TB, h *Hub) *conn {
	t.Helper()
	near, far := tcpPair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			if _, err := far.Read(buf); err != nil {
				return
			}
		}
	}()
	u, _ := h.auth.(*auth.Service).Users().Lookup("root")
	c := &conn{h: h, nc: &lockedConn{Conn: near}, raw: rawConn(near), user: u, slot: -1}
	t.Cleanup(func() {
		c.end(far)
		<-done
	})
	return c
}

// end stops c's writers as its reader does when it ends, and closes both
// ends of its socket.
func (c *conn) end(far net.Conn) {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.flushers.Wait()
	c.nc.Close()
	far.Close()
}

// tcpPair is both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	far, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	near, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return near, far
}

// sendOne queues f to c, starts the flusher and waits for it to end.
func (c *conn) sendOne(f *frame) {
	c.mu.Lock()
	c.push(f)
	c.kick()
	c.mu.Unlock()
	c.flushers.Wait()
}

// TestFlushAllocs: writing to an idle client (start a flusher, borrow a
// batch, writev, end) allocates nothing in the steady state. The race
// detector's sync.Pool drops items at random, hence the build tag's
// constant.
func TestFlushAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	h := bareHub(t, calls.New(calls.Config{}), testUsers(t))
	c := loopConn(t, h)
	f := &frame{b: textFrame([]byte(`{"op":"event","seq":1}`)), seq: 1, ent: firstEnt, msgs: 1}
	c.sendOne(f)
	if n := testing.AllocsPerRun(1000, func() { c.sendOne(f) }); n > 0.05 {
		t.Errorf("a write to an idle client allocates %.2f times", n)
	}
}
