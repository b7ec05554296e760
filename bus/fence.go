package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Fencing (docs/scale-out.md, "Fencing: a cut-off leader steps down
// first"). A leader cut off from NATS can renew no lease, but nothing
// tells it that a standby has taken over: it must stop on its own clock
// before a standby can. So it acts on the PBX only while its grant holds
// (lease.go): fenceBound (TTL - TTL/6) after it sent its last write of
// the lease that was stored, against a standby that takes over no sooner
// than TTL after that write was stored. Every action, local (Do) or
// forwarded by another node (runAction), is stamped with the lease's
// term, the fencing token, when it is taken, and checked against the
// grant right before it is written to the AMI client: a stale token or an
// expired grant refuses it with ErrStaleLease, nothing sent. When the
// grant runs out (fencing) the node steps down at once: it stops saying
// it leads (Leading, the role in /metrics) and that it is ready, and Run
// returns ErrLeaseExpired, which stops its AMI link. A new node stands by
// (cmd/ctibridge's contend), and joins as a standby once it hears NATS.

// ErrLeaseExpired is Run's error when this node's lease ran out
// unrenewed (cut off from NATS, or the lease bucket without a JetStream
// leader for longer than the grant): it stepped down before any standby
// could take over. As after ErrDeposed (which it wraps) the node is not
// run again.
var ErrLeaseExpired = fmt.Errorf("%w: its lease expired unrenewed", ErrDeposed)

// ErrStaleLease refuses an action on a node whose lease is stale
// (expired, handed over, or never held): nothing was sent to the PBX.
// REST answers it 503 lease_stale (UnavailableCode).
var ErrStaleLease error = fenceError("bus: this node's lease of the PBX is stale: the action was not sent")

type fenceError string

func (e fenceError) Error() string { return string(e) }

// UnavailableCode is the REST error code of a 503 (rest.toError).
func (fenceError) UnavailableCode() string { return "lease_stale" }

// fencing steps the node down when its grant runs out, until ctx ends
// (Run's goroutine from the win on).
func (n *Node) fencing(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, until := n.lease.grant()
		if d := time.Until(until); d > 0 {
			t.Reset(d)
			continue
		}
		if !n.lease.fence() {
			return // handed over or released: that path steps down
		}
		n.fencedAt.Store(time.Now().UnixNano())
		n.fenced.Store(true)
		n.leading.Store(false)
		n.log.Error("lease not renewed in time: stepping down before another node can take over",
			"grant", fenceBound(n.cfg.LeaseTTL), "ago", -time.Until(until).Round(time.Millisecond))
		n.depose(ErrLeaseExpired)
		return
	}
}

// Fenced reports whether this node stepped down because its lease ran
// out: its actions are refused with ErrStaleLease from then on.
func (n *Node) Fenced() bool { return n.fenced.Load() }

// act sends an action taken under the fencing token term, if the grant
// still holds it (fencing above).
func (n *Node) act(ctx context.Context, term uint64, a ami.Message) (ami.Response, error) {
	if err := n.lease.check(term); err != nil {
		n.m.fenceRefused.Add(1)
		return ami.Response{}, err
	}
	return n.cfg.Actions.Do(ctx, a)
}

// term is the fencing token to stamp an action with: 0 (refused) on a
// node that holds no lease.
func (n *Node) term() uint64 {
	if n.lease == nil {
		return 0
	}
	t, _ := n.lease.grant()
	return t
}
