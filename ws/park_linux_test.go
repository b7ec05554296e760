package ws

import (
	"bytes"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// sysClient is a client made of a bare socket (no Go object of its own
// on the heap, no goroutine), so that what the process holds per client
// is the hub's. It upgrades, sends a subscribe and reads until its
// snapshot. The caller closes it.
func sysClient(t testing.TB, host, token string) int {
	t.Helper()
	ta, err := net.ResolveTCPAddr("tcp4", host)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tv := syscall.Timeval{Sec: 10}
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	for err = syscall.Connect(fd, sa); err == syscall.EINTR || err == syscall.EALREADY; err = syscall.Connect(fd, sa) {
		time.Sleep(time.Millisecond) // interrupted by the runtime's signals: it goes on
	}
	if err != nil && err != syscall.EISCONN {
		t.Fatal(err)
	}
	req := "GET /ws HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	sysWrite(t, fd, []byte(req))
	// Then, upgraded (a byte sent before the answer would fail the
	// upgrade), the subscribe.
	sysReadUntil(t, fd, "\r\n\r\n")
	sysWrite(t, fd, clientFrame(true, opText, []byte(`{"op":"subscribe","topics":["extensions"]}`), true))
	sysReadUntil(t, fd, `{"op":"snapshot"`)
	return fd
}

func sysWrite(t testing.TB, fd int, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
}

// sysReadUntil reads until what was read contains s.
func sysReadUntil(t testing.TB, fd int, s string) {
	t.Helper()
	var in []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(in, []byte(s)) {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("client: %v after %q, waiting for %q", err, in, s)
		}
		in = append(in, buf[:n]...)
	}
}

// idleCost is what the process holds after collections.
func idleCost() (heap, stack uint64, goroutines int) {
	var m runtime.MemStats
	for range 3 { // a goroutine stack is halved at most once per collection
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse, runtime.NumGoroutine()
}

// TestIdleClientAlloc: a subscribed client that sends nothing costs the
// hub no goroutine, no stack and no buffer: under 1,300 bytes of heap
// (its conn, the socket's net.TCPConn and addresses, its expiry timer and
// revocation watch), where a reader goroutine blocked in gorilla's read
// and gorilla's Conn kept cost several times that (docs/performance.md).
// And a parked client is still served: a message wakes it.
func TestIdleClientAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("memory is not meaningful under the race detector")
	}
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{PingInterval: time.Hour})
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "ws://"), "/ws")
	tok := e.token("alice")
	const n = 500
	fds := make([]int, n+1)
	t.Cleanup(func() {
		for _, fd := range fds {
			if fd > 0 {
				syscall.Close(fd)
			}
		}
	})
	fds[n] = sysClient(t, host, tok) // the first one grows what all share
	heap0, stack0, g0 := idleCost()
	for i := range n {
		fds[i] = sysClient(t, host, tok)
	}
	heap1, stack1, g1 := idleCost()
	perHeap, perStack := (int64(heap1)-int64(heap0))/n, (int64(stack1)-int64(stack0))/n
	t.Logf("%d idle clients: %d bytes of heap and %d of stack each; goroutines %d -> %d", n, perHeap, perStack, g0, g1)
	if g1-g0 > 5 {
		t.Errorf("%d idle clients hold %d goroutines", n, g1-g0)
	}
	if perStack > 2048 { // a goroutine's least stack: the runtime keeps some of the turns' freed ones
		t.Errorf("%d bytes of stack per idle client", perStack)
	}
	if perHeap > 1300 {
		t.Errorf("%d bytes of heap per idle client", perHeap)
	}
	// Parked, each still answers: a ping from every client wakes its
	// reader, which answers and parks again.
	ping := clientFrame(true, opText, []byte(`{"op":"ping"}`), true)
	for _, fd := range fds {
		sysWrite(t, fd, ping)
	}
	for _, fd := range fds {
		sysReadUntil(t, fd, `{"op":"pong"}`)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > g0+5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > g0+5 {
		t.Errorf("after one message each, %d goroutines (%d before): the readers did not park again", g, g0)
	}
}

// TestArmWhileStopping: connections re-arming in the poller from many
// goroutines at once (each epoll_ctl under the set's read lock, none
// waiting for another's) all see the poller stop: every arm after stop
// returns false, and forget after it makes no epoll_ctl on the closed
// set but frees the id.
func TestArmWhileStopping(t *testing.T) {
	h := bareHub(t, calls.New(calls.Config{}), testUsers(t))
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	cs := make([]*conn, n)
	for i := range cs {
		near, far := tcpPair(t)
		t.Cleanup(func() { near.Close(); far.Close() })
		cs[i] = &conn{h: h, nc: &lockedConn{Conn: near}, raw: rawConn(near)}
	}
	done := make(chan int, n)
	var armed sync.WaitGroup
	armed.Add(n)
	for _, c := range cs {
		go func() {
			arms := 0
			for {
				c.mu.Lock()
				ok := p.arm(c)
				c.mu.Unlock()
				if !ok {
					break
				}
				if arms++; arms == 10 {
					armed.Done()
				}
			}
			done <- arms
		}()
	}
	armed.Wait() // each has armed ten times, and goes on
	p.stop()
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-done:
		case <-timeout:
			t.Fatal("arms went on after the poller stopped")
		}
	}
	for _, c := range cs {
		p.forget(c)
		if c.pollID != 0 {
			t.Errorf("id %d kept after forget", c.pollID)
		}
	}
}
