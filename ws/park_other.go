//go:build !linux

package ws

// poller: parking needs epoll (park.go); elsewhere every connection keeps
// its reader goroutine.
type poller struct{}

// newPoller returns none: there is no poller here.
func newPoller() (*poller, error) { return nil, nil }

func (*poller) arm(*conn) bool { return false }
func (*poller) forget(*conn)   {}
func (*poller) stop()          {}
