//go:build linux

package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnavailable wraps the reason a namespace could not be made (not
// root, no iproute2, no veth): a test skips on it, the lab reports it.
var ErrUnavailable = errors.New("netns: no network namespace")

// NS is a network namespace linked to the host's by a veth pair: host
// 10.251.x.1/30 (HostIP), namespace 10.251.x.2/30.
type NS struct {
	Name   string // ip netns name, ctibfence-<hex>
	HostIP string // the host's end of the link

	host  string   // the host end's device
	ns    *os.File // the namespace, for setns
	host0 *os.File // the host's namespace, to go back to

	ctx    context.Context // ends with Close: the relays stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// New makes a namespace and its link, up, and waits until a connection
// from it reaches the host's end. It needs root; otherwise the error
// wraps ErrUnavailable.
func New() (*NS, error) {
	var id [3]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	n := &NS{Name: "ctibfence-" + tag, host: "vh" + tag, HostIP: fmt.Sprintf("10.251.%d.1", id[0])}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	peer := "vn" + tag
	nsIP := fmt.Sprintf("10.251.%d.2/30", id[0])
	if err := ip("netns", "add", n.Name); err != nil {
		return nil, fmt.Errorf("%w (needs root and iproute2): %v", ErrUnavailable, err)
	}
	for _, args := range [][]string{
		{"link", "add", n.host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.Name},
		{"addr", "add", n.HostIP + "/30", "dev", n.host},
		{"link", "set", n.host, "up"},
		{"-n", n.Name, "addr", "add", nsIP, "dev", peer},
		{"-n", n.Name, "link", "set", peer, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			n.Close()
			return nil, fmt.Errorf("%w: cannot link it by veth: %v", ErrUnavailable, err)
		}
	}
	var err error
	if n.ns, err = os.Open("/var/run/netns/" + n.Name); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if n.host0, err = os.Open("/proc/thread-self/ns/net"); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: the host's namespace: %v", ErrUnavailable, err)
	}
	if err := n.wait(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close stops the relays and removes the link and the namespace.
func (n *NS) Close() {
	n.closed.Do(func() {
		n.cancel()
		n.wg.Wait()
		ip("link", "del", n.host)
		ip("netns", "del", n.Name)
		if n.ns != nil {
			n.ns.Close()
		}
		if n.host0 != nil {
			n.host0.Close()
		}
	})
}

// wait returns once a connection from the namespace reaches the host's
// end of the link (a veth link just up may refuse for a moment), or
// after 10 s with an error.
func (n *NS) wait() error {
	ln, err := net.Listen("tcp", n.HostIP+":0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := n.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %s does not reach %s: %w", n.Name, n.HostIP, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dial makes the connection from inside the namespace: on a thread of
// its own that joined it (never unlocked, so the thread ends with the
// goroutine rather than serve others there).
func (n *NS) Dial(network, address string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once back in the host's namespace
		if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- dialed{err: fmt.Errorf("setns %s: %w", n.Name, err)}
			return
		}
		c, err := net.DialTimeout(network, address, 2*time.Second)
		ch <- dialed{c, err}
		if unix.Setns(int(n.host0.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	d := <-ch
	return d.c, d.err
}

// Relay listens on the host's end of the link and relays each
// connection to target (host:port on the host): the address returned is
// what the namespace reaches target by. It runs until Close.
func (n *NS) Relay(target string) (string, error) {
	ln, err := net.Listen("tcp", n.HostIP+":0")
	if err != nil {
		return "", err
	}
	n.serve(ln, func() (net.Conn, error) { return net.DialTimeout("tcp", target, 2*time.Second) })
	return ln.Addr().String(), nil
}

// Through listens on the host's loopback and relays each connection to
// target from inside the namespace, across the link (to a Relay on its
// host end): a process on the host that connects to the address
// returned is cut off from target while the link is down, its
// connection open and silent, its new ones failing. It runs until Close.
func (n *NS) Through(target string) (string, error) {
	back, err := n.Relay(target)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.serve(ln, func() (net.Conn, error) { return n.Dial("tcp", back) })
	return ln.Addr().String(), nil
}

// serve accepts on ln until Close and copies each connection both ways
// to the one dial makes.
func (n *NS) serve(ln net.Listener, dial func() (net.Conn, error)) {
	stop := context.AfterFunc(n.ctx, func() { ln.Close() })
	n.wg.Go(func() {
		defer stop()
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				up, err := dial()
				if err != nil {
					down.Close()
					return
				}
				cut := context.AfterFunc(n.ctx, func() { down.Close(); up.Close() })
				defer cut()
				go func() { io.Copy(up, down); up.Close() }()
				io.Copy(down, up)
				down.Close()
			})
		}
	})
}

// Down partitions the namespace: its link's host end goes down, every
// packet dropped both ways.
func (n *NS) Down() error { return ip("link", "set", n.host, "down") }

// Up heals it, and waits until a connection from the namespace reaches
// the host again.
func (n *NS) Up() error {
	if err := ip("link", "set", n.host, "up"); err != nil {
		return err
	}
	return n.wait()
}
