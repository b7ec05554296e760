//go:build !unix

package ws

import (
	"net"
	"syscall"
)

// rawConn is nil here: no direct writes (direct.go), every write goes
// through the connection's flusher (writer.go).
func rawConn(net.Conn) syscall.RawConn { return nil }

// rawWrite is never called: without a raw socket nothing is queued for
// a writer (Hub.queue).
func (w *dwriter) rawWrite(uintptr) { panic("ws: no direct writes") }
