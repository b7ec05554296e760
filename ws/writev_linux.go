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
	vec  []syscall.Iovec
	n    int64
	err  error
	step func(uintptr) bool
}

// writev writes b.bufs with writev(2) on the raw socket, waiting for it
// within the write deadline as net does, but with the batch's iovecs,
// borrowed with it: net's own writev keeps an iovec array per socket, 16
// bytes a buffer of its largest write (a snapshot's pieces), for the
// connection's whole life.
func (b *batch) writev(raw syscall.RawConn) (int64, error) {
	if b.step == nil {
		b.step = b.writevStep // made once per batch: a closure would allocate per write
	}
	b.n, b.err = 0, nil
	err := raw.Write(b.step)
	clear(b.vec)
	b.vec = b.vec[:0]
	if err == nil {
		err = b.err
	}
	return b.n, err
}

// writevStep writes what is left of b.bufs until done (true) or the
// socket is full (false: RawConn.Write waits for it and calls again).
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
