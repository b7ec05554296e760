//go:build !linux

package ws

import "syscall"

// haveWritev: no batch.writev here; net's writev is used.
const haveWritev = false

// writevState: batch.writev keeps nothing here.
type writevState struct{}

func (b *batch) writev(syscall.RawConn) (int64, error) { panic("ws: no writev") }
