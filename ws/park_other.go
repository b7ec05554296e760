//go:build !linux

package ws

import "errors"

// poller: parking needs epoll (park.go); elsewhere every connection keeps
// its reader goroutine.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("ws: no poller on this system") }

func (*poller) arm(*conn) bool { return false }
func (*poller) forget(*conn)   {}
func (*poller) stop()          {}
