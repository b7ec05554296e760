package ws

import (
	"sync"
	"syscall"
)

// poller is the hub's epoll set of parked connections (park.go), and the
// goroutine waiting on it. A connection is registered once, by an id of
// the poller's (not its file descriptor, which a closed socket's
// successor may reuse), one-shot: an event disarms it until the next park
// re-arms it. Every epoll_ctl goes through the socket's RawConn.Control,
// so none can reach a descriptor that has been closed.
type poller struct {
	epfd int
	pipe [2]int        // written by stop; its read end has id 0
	done chan struct{} // closed when run returns

	mu      sync.Mutex // guards the fields below
	conns   []*conn    // by id-1
	free    []int32    // ids of conns' empty slots
	stopped bool
	// The epoll_ctl in progress, for ctl (a method value made once: a
	// closure would allocate per park).
	op    int
	ev    syscall.EpollEvent
	err   error
	ctlFn func(uintptr)
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func newPoller() (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	p := &poller{epfd: epfd, done: make(chan struct{})}
	if err := syscall.Pipe2(p.pipe[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.pipe[0], &syscall.EpollEvent{Events: syscall.EPOLLIN}); err != nil {
		p.closeFDs()
		return nil, err
	}
	p.ctlFn = p.ctl
	go p.run()
	return p, nil
}

func (p *poller) closeFDs() {
	syscall.Close(p.epfd)
	syscall.Close(p.pipe[0])
	syscall.Close(p.pipe[1])
}

// arm registers c, or re-arms its registration; under c.mu. False when
// the poller has stopped or the socket is closed.
func (p *poller) arm(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	op := syscall.EPOLL_CTL_MOD
	if c.pollID == 0 {
		op = syscall.EPOLL_CTL_ADD
		if n := len(p.free); n > 0 {
			c.pollID = p.free[n-1]
			p.free = p.free[:n-1]
			p.conns[c.pollID-1] = c
		} else {
			p.conns = append(p.conns, c)
			c.pollID = int32(len(p.conns))
		}
	}
	if p.control(c, op) {
		return true
	}
	if op == syscall.EPOLL_CTL_ADD {
		p.release(c)
	}
	return false
}

// forget drops c's registration when its reader is done for good.
func (p *poller) forget(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.pollID == 0 {
		return
	}
	if !p.stopped {
		// Fails when the socket is closed already: the kernel dropped
		// the registration with it.
		p.control(c, syscall.EPOLL_CTL_DEL)
	}
	p.release(c)
}

// release frees c's id, under p.mu.
func (p *poller) release(c *conn) {
	p.conns[c.pollID-1] = nil
	p.free = append(p.free, c.pollID)
	c.pollID = 0
}

// control runs epoll_ctl op for c's socket, under p.mu.
func (p *poller) control(c *conn, op int) bool {
	p.op, p.ev, p.err = op, syscall.EpollEvent{Events: pollEvents, Fd: c.pollID}, nil
	if err := c.raw.Control(p.ctlFn); err != nil {
		return false
	}
	return p.err == nil
}

func (p *poller) ctl(fd uintptr) {
	p.err = syscall.EpollCtl(p.epfd, p.op, int(fd), &p.ev)
}

func (p *poller) run() {
	defer close(p.done)
	evs := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(p.epfd, evs, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range evs[:n] {
			if ev.Fd == 0 {
				return // stop
			}
			p.mu.Lock()
			var c *conn
			if i := int(ev.Fd) - 1; i < len(p.conns) {
				c = p.conns[i]
			}
			p.mu.Unlock()
			if c != nil {
				c.mu.Lock()
				c.wake()
				c.mu.Unlock()
			}
		}
	}
}

// stop ends the poller's goroutine and closes its set; connections park
// no more (their readers block instead). Every parked connection must
// have been woken first (Hub.goAway's closes do).
func (p *poller) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	syscall.Write(p.pipe[1], []byte{1})
	<-p.done
	p.closeFDs()
}
