package ws

import (
	"syscall"
	"unsafe"
)

// haveWritev: batch.writev is this system's writev(2).
const haveWritev = true

// maxIOV is the most buffers one writev takes (Linux's IOV_MAX).
const maxIOV = 1024

// writevState is a batch's scratch for writev.
type writevState struct {
	vec []syscall.Iovec
	n   int64
	err error
	// writevStep's wrappers for RawConn.Write and Control, made once
	// per batch: a closure would allocate per write.
	step func(uintptr) bool
	now  func(uintptr)
}

// writev writes b.bufs with writev(2) on the raw socket, waiting for it
// as net does, but with the batch's iovecs, borrowed with it: net's own
// writev keeps an iovec array per socket, 16 bytes a buffer of its
// largest write (a snapshot's pieces), for the connection's whole life.
// No deadline: once the socket is full the write waits under the hub's
// watchdog (watchdog.go), which drops b.c if it waits too long.
func (b *batch) writev(raw syscall.RawConn) (int64, error) {
	if b.step == nil {
		b.step = b.waitStep
	}
	b.n, b.err, b.waited = 0, nil, false
	err := raw.Write(b.step)
	if b.waited {
		b.c.h.stuck.done(b.c)
	}
	clear(b.vec)
	b.vec = b.vec[:0]
	if err == nil {
		err = b.err
	}
	return b.n, err
}

// waitStep is writevStep for RawConn.Write: the first time the socket is
// full, the write is handed to the watchdog.
func (b *batch) waitStep(fd uintptr) bool {
	done := b.writevStep(fd)
	if !done && !b.waited {
		b.waited = true
		b.c.h.stuck.wait(b.c)
	}
	return done
}

// writevNow writes what the socket takes of b.bufs at once, never
// waiting: what it leaves stays in b.bufs.
func (b *batch) writevNow(raw syscall.RawConn) (int64, error) {
	if b.now == nil {
		b.now = func(fd uintptr) { b.writevStep(fd) }
	}
	b.n, b.err = 0, nil
	err := raw.Control(b.now)
	clear(b.vec)
	b.vec = b.vec[:0]
	if err == nil {
		err = b.err
	}
	return b.n, err
}

// directState: a writer needs nothing beyond its batch here.
type directState struct{}

// try writes w.b.iov to c's socket without waiting: the bytes written
// and the error; what the socket did not take is left in w.b.bufs. It
// leaves everything when another write holds the socket (a close reply).
func (w *dwriter) try(c *conn) (int64, error) {
	b := &w.b
	b.bufs = b.iov
	if !c.nc.mu.TryLock() {
		return 0, nil
	}
	defer c.nc.mu.Unlock()
	return b.writevNow(c.raw)
}

// writevStep writes what is left of b.bufs until done (true) or the
// socket is full (false: RawConn.Write waits for it and calls again;
// Control leaves the rest in b.bufs).
func (b *batch) writevStep(fd uintptr) bool {
	for len(b.bufs) > 0 {
		vec := b.vec[:0]
		for _, p := range b.bufs {
			if len(vec) == maxIOV {
				break
			}
			if len(p) > 0 {
				v := syscall.Iovec{Base: &p[0]}
				v.SetLen(len(p))
				vec = append(vec, v)
			}
		}
		b.vec = vec
		if len(vec) == 0 {
			break
		}
		n, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&vec[0])), uintptr(len(vec)))
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			b.err = e
			return true
		}
		b.n += int64(n)
		b.consume(int64(n))
	}
	b.bufs = b.bufs[:0]
	return true
}

// consume drops n written bytes from the front of b.bufs.
func (b *batch) consume(n int64) {
	for len(b.bufs) > 0 {
		l := int64(len(b.bufs[0]))
		if n < l {
			b.bufs[0] = b.bufs[0][n:]
			return
		}
		n -= l
		b.bufs = b.bufs[1:]
	}
}
