//go:build unix

package ws

import (
	"net"
	"syscall"
)

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

// rawConn is nc's raw socket when it is plain TCP (direct writes), else nil.
func rawConn(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
