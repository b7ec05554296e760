//go:build unix && !linux

package ws

import (
	"errors"
	"syscall"
)

// directMax is the most bytes a direct write copies; larger queues go to
// the flusher.
const directMax = 64 << 10

// directState is a writer's buffer and the write in progress, for
// rawWrite (a method value made once: a closure would allocate per
// write).
type directState struct {
	buf   []byte
	cur   []byte
	wrote int
	err   error
	fn    func(uintptr)
}

// try copies w.b.iov into one buffer and writes it to c's socket with
// one write(2), without waiting: the bytes written and the error; what
// the socket did not take is left in w.b.bufs. It leaves everything when
// the queue is larger than directMax or another write holds the socket
// (a close reply).
func (w *dwriter) try(c *conn) (int64, error) {
	b := &w.b
	b.bufs = b.iov
	total := 0
	for _, p := range b.iov {
		total += len(p)
	}
	if total > directMax || !c.nc.mu.TryLock() {
		return 0, nil
	}
	defer c.nc.mu.Unlock()
	buf := w.buf[:0]
	for _, p := range b.iov {
		buf = append(buf, p...)
	}
	w.buf = buf
	if w.fn == nil {
		w.fn = w.rawWrite
	}
	w.cur, w.wrote, w.err = buf, 0, nil
	if err := c.raw.Control(w.fn); err != nil {
		return 0, err
	}
	n, err := w.wrote, w.err
	w.cur = nil
	switch {
	case n == len(buf):
		b.bufs = b.bufs[:0]
	case n > 0:
		b.bufs = [][]byte{append([]byte(nil), buf[n:]...)} // w.buf is reused
	}
	if errors.Is(err, syscall.EAGAIN) {
		err = nil
	}
	return int64(n), err
}

// rawWrite is one write(2) on the non-blocking socket, for RawConn.Control.
func (w *dwriter) rawWrite(fd uintptr) {
	for {
		n, err := syscall.Write(int(fd), w.cur)
		if err == syscall.EINTR {
			continue
		}
		w.wrote, w.err = max(n, 0), err
		return
	}
}
