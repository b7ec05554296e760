package bus

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/calls"
)

// Leader preference (docs/scale-out.md, "Which bridge leads which PBX").
// A bridge node with Config.Prefer set, standing by while another node
// renews the lease, asks that leader, by request/reply on
// ctibridge.<pbx>.handover, to hand the lead over (at most once a
// LeaseTTL, while it follows the stream and reaches the PBX:
// Config.Reachable). A leader that is not preferred
// itself agrees, and steps down at a safe point: no publish in flight,
// no batch of its link being chunked out (a batch's chunk published in
// the last chunkQuiet; ops a Replica left waiting for the next Publish,
// after RefreshDurations, are as good as a batch's end) and no link
// change under way (a rollover's resync), it publishes a last message that
// marks the state resyncing (down stays down), publishes nothing more,
// and rewrites the lease naming the asking node, on its own revision;
// its Run returns ErrHandedOver. The preferred node, having asked, takes
// the lease naming it with a compare-and-set on that revision, catches
// up with the stream (the last message included) and leads: it
// publishes no "down" of its own, so its clients see the state
// resyncing from the old leader's last batch until its link has
// resynchronised, the feed going on under the same epoch, and the resync
// removing what ended meanwhile. A preferred leader refuses (two nodes
// that both prefer a PBX do not pass it back and forth: whichever leads
// keeps it, and the other logs so); a leader that finds no safe point
// within LeaseTTL/6 refuses too, and is asked again a TTL later. Should
// the asking node die before it takes the lease, the lease stands still
// and is taken over after LeaseTTL as after any leader's death.

// ErrHandedOver is Run's error when this node handed its lead over to a
// preferred node, or yielded it to a standby that logs in (yield.go):
// as after ErrDeposed (which it wraps) the node is not run again, and a
// new one stands by.
var ErrHandedOver = fmt.Errorf("%w: handed over to another node", ErrDeposed)

// A handover request's answers.
const (
	handOK        = 0 // stepped down; the lease names the asking node (or is let go when it could not be rewritten)
	handPreferred = 1 // this leader is preferred too: it keeps the lead
	handBusy      = 2 // not leading, stepping down already, or no safe point in time
)

// newLease is the lease Run contends for: a preferred node's asks for a
// handover.
func (n *Node) newLease(kv jetstream.KeyValue) *lease {
	l := &lease{kv: kv, key: n.cfg.PBX, node: n.cfg.Node, ttl: n.cfg.LeaseTTL, log: n.log,
		handTo: make(chan transfer), leaderChecks: &n.m.leaderChecks}
	if n.cfg.Prefer {
		l.ask = n.askHandover
	}
	n.lease = l
	return l
}

func (n *Node) handoverSubject() string { return "ctibridge." + n.cfg.PBX + ".handover" }

// following reports whether this standby follows the stream closely
// (64 messages behind at most: it catches up before it leads).
func (n *Node) following() bool {
	last := n.m.streamLast.Load() // read every second (watch); 0 until then
	return n.ready.Load() && !n.cutOff.Load() && last != 0 && n.applied.Load()+64 >= last
}

// askHandover asks holder, the leader, to hand the lead over to this
// node, if it follows the stream closely and passes Reachable (the
// lease's ask; it reports whether it asked or probed).
func (n *Node) askHandover(ctx context.Context, holder string) bool {
	if !n.following() {
		return false
	}
	if n.cfg.Reachable != nil {
		if time.Now().Before(n.probeAgain) {
			return true // backing off: counts as probed
		}
		if err := n.cfg.Reachable(ctx); err != nil {
			if !n.warnedUnreachable {
				n.warnedUnreachable = true
				n.log.Warn("preferred, but the PBX is out of reach: not asking for the lead", "leader", holder, "err", err)
			}
			// Probed: each probe is a login, a failed one in the PBX's
			// security log (and fail2ban's): again a TTL later, then
			// twice as long after each failure in a row.
			n.probeFails++
			n.probeAgain = time.Now().Add(probeBackoff(n.probeFails, n.cfg.LeaseTTL))
			return true
		}
		n.warnedUnreachable, n.probeFails, n.probeAgain = false, 0, time.Time{}
	}
	m, err := n.nc.RequestWithContext(ctx, n.handoverSubject(), appendString([]byte{version}, n.cfg.Node))
	switch {
	case err != nil:
		n.log.Info("preferred: asking the leader to hand over", "leader", holder, "err", err)
	case len(m.Data) == 1 && m.Data[0] == handOK:
		n.log.Info("preferred: the leader hands over", "leader", holder)
	case len(m.Data) == 1 && m.Data[0] == handPreferred:
		if !n.warnedPreferred {
			n.warnedPreferred = true
			n.log.Warn("preferred, but so is the leader: it keeps the lead (--bus-prefer names this PBX on both)", "leader", holder)
		}
	}
	return true
}

// maxProbeBackoff bounds the wait between a preferred node's probes
// that keep failing.
const maxProbeBackoff = 5 * time.Minute

// probeBackoff is the wait after the fails-th failed probe in a row:
// one TTL after the first (the lease asks no sooner anyway), doubling
// after each further one up to maxProbeBackoff.
func probeBackoff(fails int, ttl time.Duration) time.Duration {
	d := ttl
	for i := 1; i < fails && d < maxProbeBackoff; i++ {
		d *= 2
	}
	return min(d, maxProbeBackoff)
}

// serveHandover subscribes the leader to handover requests until Run
// ends.
func (n *Node) serveHandover() error {
	sub, err := n.nc.Subscribe(n.handoverSubject(), func(m *nats.Msg) {
		d := decoder{b: m.Data}
		if d.byte() != version || d.err != nil {
			return
		}
		if to := d.string(); d.err == nil && to != "" {
			m.Respond([]byte{n.handOver(to)})
		}
	})
	if err != nil {
		return err
	}
	context.AfterFunc(n.ctx, func() { sub.Unsubscribe() })
	return nil
}

// handOver answers a request of node to: if this node leads and is not
// preferred, it steps down and hands the lease to to.
func (n *Node) handOver(to string) byte {
	if n.cfg.Prefer {
		return handPreferred
	}
	if !n.handLead(to) {
		return handBusy
	}
	return handOK
}

// handLead is every handover: to a preferred node that asked
// (handOver), and to a standby that logs in while this leader's link is
// down (yield.go). If this node leads, it steps down at a safe point
// and hands the lease to to; it reports whether it did.
func (n *Node) handLead(to string) bool {
	if !n.leading.Load() || !n.stepDown() {
		return false
	}
	n.m.handovers.Add(1)
	h := transfer{node: to, done: make(chan error, 1)}
	var err error
	select {
	case n.lease.handTo <- h:
		err = <-h.done
	case <-n.ctx.Done():
		err = n.ctx.Err()
	case <-time.After(n.cfg.LeaseTTL / 2):
		err = fmt.Errorf("the lease's renewal did not answer in %v", n.cfg.LeaseTTL/2)
	}
	if err != nil {
		// Run's end releases the lease: someone takes it at once.
		n.log.Warn("handover: the lease could not be rewritten for the preferred node; letting it go", "to", to, "err", err)
	} else {
		n.log.Info("handed the lead over", "to", to, "stream_seq", n.pubSeqNow())
	}
	n.depose(ErrHandedOver)
	return true
}

// chunkQuiet: a batch whose last chunk went out longer ago than this is
// not being chunked out (stepDown).
const chunkQuiet = 50 * time.Millisecond

// stepDown waits, for LeaseTTL/6 at most, for a safe point: no batch
// being chunked out, no link change under way (midLink: a rollover's
// resync, a stall marker's restore). There it publishes the last
// message, the state resyncing (or down, if it was), and stops
// publishing (publish refuses with ErrHandedOver from then on). It
// reports whether it stepped down; an error publishing deposes the node.
func (n *Node) stepDown() bool {
	deadline := time.Now().Add(n.cfg.LeaseTTL / 6)
	for {
		n.handMu.Lock()
		if n.chunkAt.IsZero() || time.Since(n.chunkAt) > chunkQuiet {
			n.pubMu.Lock()
			if n.handedOff {
				n.pubMu.Unlock()
				n.handMu.Unlock()
				return false
			}
			if !n.midLink && !n.restorePending {
				state := calls.LinkResyncing
				if n.lastLink == calls.LinkDown {
					state = calls.LinkDown
				}
				err := n.publish(linkMessage(state))
				n.handedOff = true
				n.pubMu.Unlock()
				n.handMu.Unlock()
				if err != nil {
					n.depose(err)
					return false
				}
				return true
			}
			n.pubMu.Unlock()
		}
		n.handMu.Unlock()
		if time.Now().After(deadline) {
			n.log.Info("handover: no safe point (a batch or a link change under way): asked again later")
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// flush is the primary replica's flush while leading: publishBatch,
// noting when a batch's chunk went out (stepDown's safe point).
func (n *Node) flush(data []byte, final bool) error {
	n.handMu.Lock()
	defer n.handMu.Unlock()
	err := n.publishBatch(data, final)
	n.chunkAt = time.Time{}
	if err == nil && !final {
		n.chunkAt = time.Now()
	}
	return err
}

// linkMessage is an ops message of SetLink(s) and Publish, now.
func linkMessage(s calls.LinkState) []byte {
	b := []byte{version, kindOps, opSetLink}
	b = binary.AppendVarint(b, time.Now().UnixNano())
	return append(b, byte(s), opPublish, 0)
}

// pubSeqNow is the last seq this leader published.
func (n *Node) pubSeqNow() uint64 {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	return n.pubSeq
}
