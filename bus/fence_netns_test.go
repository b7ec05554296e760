//go:build linux

package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctibridge/ctibridge/bus/natstest"
)

// TestFencedLeaderNetns is TestFencedLeaderCutOff with the partition
// made by the kernel: bridge-a's NATS sockets are made in a network
// namespace of their own (the dialer's thread joins it), linked to the
// host's by a veth pair, and reach the servers through relays on the
// host's end of it; the partition takes that link down (every packet
// dropped, both ways), the heal brings it up again. It needs root (ip
// netns, veth): skipped, with the reason, where it cannot make them.
func TestFencedLeaderNetns(t *testing.T) {
	ns := newNetns(t)
	testFencedLeader(t, partition{dialer: ns, url: ns.relays, cut: ns.down, heal: ns.up})
}

// netns is a network namespace linked to the host's by a veth pair:
// host 10.251.x.1/30 (dev host), namespace 10.251.x.2/30.
type netns struct {
	t          *testing.T
	name, host string
	hostIP     string
	fd         int // the namespace's, for setns
	host0      int // the host's namespace, to go back to
}

func newNetns(t *testing.T) *netns {
	var id [3]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	n := &netns{t: t, name: "ctibfence-" + tag, host: "vh" + tag, hostIP: fmt.Sprintf("10.251.%d.1", id[0])}
	peer := "vn" + tag
	nsIP := fmt.Sprintf("10.251.%d.2/30", id[0])
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("netns", "add", n.name); err != nil {
		t.Skipf("no network namespace (needs root and iproute2): %v", err)
	}
	t.Cleanup(func() {
		run("link", "del", n.host)
		run("netns", "del", n.name)
	})
	for _, args := range [][]string{
		{"link", "add", n.host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.host},
		{"link", "set", n.host, "up"},
		{"-n", n.name, "addr", "add", nsIP, "dev", peer},
		{"-n", n.name, "link", "set", peer, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			t.Skipf("cannot link a network namespace by veth: %v", err)
		}
	}
	f, err := os.Open("/var/run/netns/" + n.name)
	if err != nil {
		t.Skipf("network namespace %s: %v", n.name, err)
	}
	t.Cleanup(func() { f.Close() })
	n.fd = int(f.Fd())
	h, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Skipf("the host's network namespace: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	n.host0 = int(h.Fd())
	n.wait()
	return n
}

// wait returns once a connection from the namespace reaches the host's
// end of the link (a veth link just up may refuse for a moment).
func (n *netns) wait() {
	ln, err := net.Listen("tcp", n.hostIP+":0")
	if err != nil {
		n.t.Fatal(err)
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
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("the namespace %s does not reach %s: %v", n.name, n.hostIP, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dial makes the connection from inside the namespace: on a thread of
// its own that joined it (never unlocked, so the thread ends with the
// goroutine rather than serve others there).
func (n *netns) Dial(network, address string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once back in the host's namespace
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- dialed{err: fmt.Errorf("setns %s: %w", n.name, err)}
			return
		}
		c, err := net.DialTimeout(network, address, 2*time.Second)
		ch <- dialed{c, err}
		if unix.Setns(n.host0, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	d := <-ch
	return d.c, d.err
}

// relays listens on the host's end of the veth for each server and
// relays to it, and returns their URLs (what the namespace can reach).
func (n *netns) relays(cluster []*natstest.Server) string {
	var urls []string
	for _, s := range cluster {
		ln, err := net.Listen("tcp", n.hostIP+":0")
		if err != nil {
			n.t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { relay(ctx, ln, "127.0.0.1:"+strconv.Itoa(s.Port)) })
		n.t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
		urls = append(urls, "nats://"+ln.Addr().String())
	}
	return strings.Join(urls, ",")
}

// relay forwards each connection accepted on ln to target until ctx ends.
func relay(ctx context.Context, ln net.Listener, target string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			down.Close()
			continue
		}
		stop := context.AfterFunc(ctx, func() { down.Close(); up.Close() })
		wg.Go(func() {
			defer stop()
			go func() { io.Copy(up, down); up.Close() }()
			io.Copy(down, up)
			down.Close()
		})
	}
}

// down partitions the namespace: its link's host end goes down.
func (n *netns) down() { n.link("down") }

// up heals it.
func (n *netns) up() {
	n.link("up")
	n.wait()
}

func (n *netns) link(state string) {
	if out, err := exec.Command("ip", "link", "set", n.host, state).CombinedOutput(); err != nil {
		n.t.Fatalf("ip link set %s %s: %v: %s", n.host, state, err, out)
	}
}
