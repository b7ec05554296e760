//go:build unix

package ws

import (
	"net"
	"syscall"
)

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
