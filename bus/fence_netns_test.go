//go:build linux

package bus

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/bus/natstest/netns"
)

// TestFencedLeaderNetns is TestFencedLeaderCutOff with the partition
// made by the kernel: bridge-a's NATS sockets are made in a network
// namespace of their own (the dialer's thread joins it), linked to the
// host's by a veth pair, and reach the servers through relays on the
// host's end of it; the partition takes that link down (every packet
// dropped, both ways), the heal brings it up again. It needs root (ip
// netns, veth): skipped, with the reason, where it cannot make them.
func TestFencedLeaderNetns(t *testing.T) {
	ns, err := netns.New()
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	relays := func(cluster []*natstest.Server) string {
		var urls []string
		for _, s := range cluster {
			addr, err := ns.Relay("127.0.0.1:" + strconv.Itoa(s.Port))
			if err != nil {
				t.Fatal(err)
			}
			urls = append(urls, "nats://"+addr)
		}
		return strings.Join(urls, ",")
	}
	must := func(f func() error) func() {
		return func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
	}
	testFencedLeader(t, partition{dialer: ns, url: relays, cut: must(ns.Down), heal: must(ns.Up)})
}
