package wsframe

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Readers reads many WebSocket connections with a few goroutines, each
// waiting on an epoll set of its own and reading each ready socket into
// one shared buffer: a connection costs a file descriptor and about 300
// bytes, not a goroutine and a buffer. It answers pings and discards all
// but the head of each message, so it suits load tools that only count
// and time what arrives, such as thousands of screens.
type Readers struct {
	h       Handler
	bin     BinaryHandler // h, when it counts binary messages
	whole   bool          // deliver whole messages, not heads
	workers []*rworker
	closed  atomic.Bool
	wg      sync.WaitGroup
}

type rworker struct {
	r     *Readers
	n     int
	epfd  int
	mu    sync.Mutex
	conns map[int32]*rconn
	buf   []byte
}

// rconn is one connection's framing state.
type rconn struct {
	id     int
	fd     int
	hdr    [14]byte
	hn     int    // header bytes collected
	left   uint64 // payload bytes of the current frame still to come
	inBody bool
	op     byte
	head   [HeadMax]byte
	headN  int
	got    uint64 // payload bytes of the current frame seen
	// whole Readers: the current text message, when it arrives in more
	// than one read (else it is handed over from the read buffer).
	body []byte
	msg  []byte // the whole message just completed
}

// NewReaders starts n worker goroutines (at least 1); handlers see the
// head of each message.
func NewReaders(n int, h Handler) (*Readers, error) {
	return newReaders(n, h, false)
}

// NewWholeReaders is NewReaders for handlers that need each whole
// message (a screen decoding what it shows): a message read at once is
// handed over from the worker's buffer, one split over reads is gathered
// in a buffer of its connection.
func NewWholeReaders(n int, h Handler) (*Readers, error) {
	return newReaders(n, h, true)
}

func newReaders(n int, h Handler, whole bool) (*Readers, error) {
	r := &Readers{h: h, whole: whole}
	r.bin, _ = h.(BinaryHandler)
	for i := range max(n, 1) {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("wsframe: epoll: %w", err)
		}
		w := &rworker{r: r, n: i, epfd: fd, conns: map[int32]*rconn{}, buf: make([]byte, 256<<10)}
		r.workers = append(r.workers, w)
		r.wg.Add(1)
		go w.run()
	}
	return r, nil
}

// Dial connects connection id to ws://addr/path with a bearer token,
// upgrades it, sends first (a text message, such as a subscribe) and
// hands it to a worker. It blocks until the upgrade is answered.
func (r *Readers) Dial(addr, path, token string, id int, first []byte) error {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wsframe: socket: %w", err)
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	rest, err := upgrade(fd, sa, ta.String(), path, token)
	if err == nil {
		err = writeAll(fd, clientFrame(0x1, first))
	}
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		syscall.Close(fd)
		return err
	}
	w := r.workers[id%len(r.workers)]
	c := &rconn{id: id, fd: fd}
	w.mu.Lock()
	w.conns[int32(fd)] = c
	// The worker may not read c before what came with the upgrade's
	// answer is parsed: both under w.mu.
	err = w.feed(c, rest, time.Now().UnixNano())
	if err == nil {
		err = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)})
	}
	if err != nil {
		delete(w.conns, int32(fd))
	}
	w.mu.Unlock()
	if err != nil {
		syscall.Close(fd)
	}
	return err
}

// upgrade connects fd and does the WebSocket handshake (blocking); it
// returns the bytes read past the answer's header.
func upgrade(fd int, sa *syscall.SockaddrInet4, host, path, token string) ([]byte, error) {
	if err := connect(fd, sa); err != nil {
		return nil, fmt.Errorf("wsframe: connect %s: %w", host, err)
	}
	tv := syscall.Timeval{Sec: 60}
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	if err := writeAll(fd, []byte(req)); err != nil {
		return nil, err
	}
	var b []byte
	tmp := make([]byte, 4096)
	for {
		n, err := syscall.Read(fd, tmp)
		if err == syscall.EINTR { // the Go runtime's preemption signal
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("wsframe: upgrade: %w", err)
		}
		if n == 0 {
			return nil, errors.New("wsframe: upgrade: connection closed")
		}
		b = append(b, tmp[:n]...)
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			if !bytes.HasPrefix(b, []byte("HTTP/1.1 101")) {
				line, _, _ := strings.Cut(string(b), "\r\n")
				return nil, fmt.Errorf("wsframe: upgrade: %s", line)
			}
			return b[i+4:], nil
		}
		if len(b) > 16<<10 {
			return nil, errors.New("wsframe: upgrade: answer too long")
		}
	}
}

// connect is a blocking connect(2) that survives signals (the Go
// runtime's preemption): interrupted, the connection goes on in the
// background, and connect answers EALREADY until it is made.
func connect(fd int, sa syscall.Sockaddr) error {
	err := syscall.Connect(fd, sa)
	for err == syscall.EINTR || err == syscall.EALREADY {
		time.Sleep(time.Millisecond)
		err = syscall.Connect(fd, sa)
	}
	if err == syscall.EISCONN {
		return nil
	}
	return err
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EAGAIN || err == syscall.EINTR {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("wsframe: write: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// clientFrame frames a client message, masked with a zero key (which
// leaves the payload as it is).
func clientFrame(op byte, p []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		return nil // the load tools send small messages only
	}
	return append(append(b, 0, 0, 0, 0), p...)
}

// Close stops the workers and closes every connection.
func (r *Readers) Close() {
	if r.closed.Swap(true) {
		return
	}
	r.wg.Wait()
	for _, w := range r.workers {
		for fd := range w.conns {
			syscall.Close(int(fd))
		}
		syscall.Close(w.epfd)
	}
}

func (w *rworker) run() {
	defer w.r.wg.Done()
	evs := make([]syscall.EpollEvent, 256)
	for !w.r.closed.Load() {
		n, err := syscall.EpollWait(w.epfd, evs, 100)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		w.mu.Lock()
		for _, ev := range evs[:n] {
			c := w.conns[ev.Fd]
			if c == nil {
				continue
			}
			k, err := syscall.Read(c.fd, w.buf)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				continue
			}
			if err == nil && k == 0 {
				err = errors.New("connection closed")
			}
			if err == nil {
				err = w.feed(c, w.buf[:k], time.Now().UnixNano())
			}
			if err != nil {
				w.drop(c, err)
			}
		}
		w.mu.Unlock()
	}
}

// drop ends c, under w.mu.
func (w *rworker) drop(c *rconn, err error) {
	syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	syscall.Close(c.fd)
	delete(w.conns, int32(c.fd))
	w.r.h.Closed(w.n, c.id, err)
}

// feed parses b as the next bytes of c's stream, under w.mu.
func (w *rworker) feed(c *rconn, b []byte, now int64) error {
	for len(b) > 0 {
		if !c.inBody {
			k := copy(c.hdr[c.hn:], b)
			// Take only the header's bytes: its length is known from
			// its second byte on.
			if c.hn+k >= 2 {
				need := 2
				switch c.hdr[1] & 0x7f {
				case 126:
					need += 2
				case 127:
					need += 8
				}
				if c.hdr[1]&0x80 != 0 {
					need += 4
				}
				k = min(k, need-c.hn)
				c.hn += k
				b = b[k:]
				if c.hn < need {
					continue
				}
				c.op, c.left, c.headN, c.got, c.inBody = c.hdr[0]&0x0f, payloadLen(c.hdr[:c.hn]), 0, 0, true
			} else {
				c.hn += k
				b = b[k:]
				continue
			}
		}
		k := int(min(c.left, uint64(len(b))))
		chunk := b[:k]
		c.headN += copy(c.head[c.headN:], chunk)
		if w.r.whole && c.op == 0x1 {
			if c.got == 0 && uint64(k) == c.left {
				c.msg = chunk // all in this read: no copy
			} else {
				c.body = append(c.body, chunk...)
				c.msg = c.body
			}
		}
		c.got += uint64(k)
		b = b[k:]
		c.left -= uint64(k)
		if c.left == 0 {
			c.inBody, c.hn = false, 0
			if err := w.message(c, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func payloadLen(h []byte) uint64 {
	switch n := h[1] & 0x7f; n {
	case 126:
		return uint64(h[2])<<8 | uint64(h[3])
	case 127:
		var v uint64
		for _, x := range h[2:10] {
			v = v<<8 | uint64(x)
		}
		return v
	default:
		return uint64(n)
	}
}

// message handles a whole frame of c (the server sends no fragments).
func (w *rworker) message(c *rconn, now int64) error {
	switch c.op {
	case 0x1:
		if !w.r.whole {
			w.r.h.Message(w.n, c.id, c.head[:c.headN], now)
			break
		}
		w.r.h.Message(w.n, c.id, c.msg, now)
		c.msg = nil
		if cap(c.body) > bodyKeep {
			c.body = nil
		} else {
			c.body = c.body[:0]
		}
	case 0x2:
		if w.r.bin != nil {
			w.r.bin.Binary(w.n, c.id, c.got)
		}
	case 0x8:
		code := 0
		if c.headN >= 2 {
			code = int(c.head[0])<<8 | int(c.head[1])
		}
		return fmt.Errorf("ws_close_%d", code)
	case 0x9:
		return writeAll(c.fd, clientFrame(0xA, c.head[:c.headN]))
	}
	return nil
}
