//go:build !unix

package ws

import (
	"net"
	"syscall"
)

// rawConn is nil here: no direct writes (direct.go), every write goes
// through the connection's flusher (writer.go).
func rawConn(net.Conn) syscall.RawConn { return nil }

// directState: no direct writes here.
type directState struct{}

// try is never called: without a raw socket nothing is handed to a
// writer (Hub.queue, kick).
func (w *dwriter) try(*conn) (int64, error) { panic("ws: no direct writes") }
