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
// so none can reach a descriptor that has been closed, and under a read
// lock of the set, so none can reach the set once stop has closed it:
// parks on different connections do not wait for each other.
type poller struct {
	epfd int
	pipe [2]int        // written by stop; its read end has id 0
	done chan struct{} // closed when run returns

	set     sync.RWMutex // read-held across an epoll_ctl, write-held by stop
	stopped bool         // guarded by set

	mu    sync.Mutex // guards the ids: held for no system call
	conns []*conn    // by id-1
	free  []int32    // ids of conns' empty slots
}

// pollCtl is one epoll_ctl in progress, for RawConn.Control (its method
// value made once, the pollCtl reused through ctls: a closure would
// allocate per park).
type pollCtl struct {
	epfd int
	op   int
	ev   syscall.EpollEvent
	err  error
	fn   func(uintptr)
}

var ctls = sync.Pool{New: func() any {
	pc := new(pollCtl)
	pc.fn = pc.ctl
	return pc
}}

func (pc *pollCtl) ctl(fd uintptr) {
	pc.err = syscall.EpollCtl(pc.epfd, pc.op, int(fd), &pc.ev)
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
	p.set.RLock()
	defer p.set.RUnlock()
	if p.stopped {
		return false
	}
	op := syscall.EPOLL_CTL_MOD
	if c.pollID == 0 {
		op = syscall.EPOLL_CTL_ADD
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			c.pollID = p.free[n-1]
			p.free = p.free[:n-1]
			p.conns[c.pollID-1] = c
		} else {
			p.conns = append(p.conns, c)
			c.pollID = int32(len(p.conns))
		}
		p.mu.Unlock()
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
	if c.pollID == 0 {
		return
	}
	p.set.RLock()
	if !p.stopped {
		// Fails when the socket is closed already: the kernel dropped
		// the registration with it.
		p.control(c, syscall.EPOLL_CTL_DEL)
	}
	p.set.RUnlock()
	p.release(c)
}

// release frees c's id.
func (p *poller) release(c *conn) {
	p.mu.Lock()
	p.conns[c.pollID-1] = nil
	p.free = append(p.free, c.pollID)
	c.pollID = 0
	p.mu.Unlock()
}

// control runs epoll_ctl op for c's socket, under a read lock of p.set.
func (p *poller) control(c *conn, op int) bool {
	pc := ctls.Get().(*pollCtl)
	defer ctls.Put(pc)
	pc.epfd, pc.op, pc.ev, pc.err = p.epfd, op, syscall.EpollEvent{Events: pollEvents, Fd: c.pollID}, nil
	if err := c.raw.Control(pc.fn); err != nil {
		return false
	}
	return pc.err == nil
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
	p.set.Lock()
	p.stopped = true
	p.set.Unlock()
	syscall.Write(p.pipe[1], []byte{1})
	<-p.done
	p.closeFDs()
}
