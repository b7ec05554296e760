// Package netns partitions by the kernel: a network namespace linked to
// the host's by a veth pair, with relays across the link, whose link
// can be taken down (every packet dropped both ways, no FIN, no RST)
// and brought up again. bus.TestFencedLeaderNetns dials a node's NATS
// connections from inside it; the lab (`ctibridge-lab loadtest
// failover`) routes a bridge process's NATS connections through it
// (Through) and cuts the leader off.
//
// It needs root (ip netns, veth, setns): New's error wraps
// ErrUnavailable otherwise, and on other systems than Linux. Dial runs
// on a thread of its own that joins the namespace. The relays' goroutines
// live until Close, which waits for them and removes the link and the
// namespace.
package netns
