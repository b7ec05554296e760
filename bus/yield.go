package bus

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctibridge/ctibridge/calls"
)

// Link yield (docs/scale-out.md, "A leader cut off from its PBX"). A
// leader whose AMI link has been down continuously for
// Config.YieldAfter (the state it publishes says down: the link is not
// logged in) asks every standby bridge, by a request on
// ctibridge.<pbx>.yield, whether it could lead: each one that follows
// the stream closely runs Config.Reachable (cmd/ctibridge: an AMI login
// and logoff) and answers yes or no, with the reason. The leader waits
// LeaseTTL+LeaseTTL/3 for the answers and hands the lead over to the
// first that said yes, by the handover of handover.go (one code path:
// stepDown's last message says down, the lease is rewritten naming it,
// Run returns ErrHandedOver); the standby, having said yes, takes the
// lease that names it as a preferred node does after asking. When none
// says yes (or none answers) the leader keeps the lead, logs why, and
// asks again YieldAfter later: two bridges that both cannot log in do
// not pass the lead back and forth. A link that comes back meanwhile
// ends the yield (the lead is kept).

// DefaultYieldAfter is Config.YieldAfter's default.
const DefaultYieldAfter = 10 * time.Second

// A yield request's answers, followed by the answering node's name and,
// for yieldNo, why.
const (
	yieldYes = 0 // this node logs in to the PBX: it takes the lead if handed it
	yieldNo  = 1 // it does not (or does not follow the stream closely)
)

func (n *Node) yieldSubject() string { return "ctibridge." + n.cfg.PBX + ".yield" }

// serveYield subscribes a bridge node to yield requests until Run ends:
// while it stands by, it answers whether it could lead.
func (n *Node) serveYield() error {
	sub, err := n.nc.Subscribe(n.yieldSubject(), func(m *nats.Msg) {
		d := decoder{b: m.Data}
		if d.byte() != version || d.err != nil || n.leading.Load() {
			return
		}
		from := d.string()
		if d.err != nil || from == n.cfg.Node {
			return
		}
		why := n.canLead()
		if why == "" {
			n.lease.invite()
			n.log.Info("the leader's link is down and this node logs in: offering to lead", "leader", from)
			m.Respond(appendString([]byte{yieldYes}, n.cfg.Node))
			return
		}
		n.log.Info("the leader's link is down, but this node cannot lead either", "leader", from, "why", why)
		m.Respond(appendString(appendString([]byte{yieldNo}, n.cfg.Node), why))
	})
	if err != nil {
		return err
	}
	context.AfterFunc(n.ctx, func() { sub.Unsubscribe() })
	return nil
}

// canLead is why this standby could not lead now ("" when it could): it
// must follow the stream closely and pass Config.Reachable (nil: it
// cannot tell, so it declines).
func (n *Node) canLead() string {
	if !n.following() {
		return "not following the stream closely"
	}
	if n.cfg.Reachable == nil {
		return "no reachability check configured"
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.LeaseTTL)
	defer cancel()
	if err := n.cfg.Reachable(ctx); err != nil {
		return err.Error()
	}
	return ""
}

// yielding runs on the leader until ctx ends: it asks the standbys to
// take over once the link has been down for YieldAfter, and again
// YieldAfter after each refusal.
func (n *Node) yielding(ctx context.Context) {
	after := n.cfg.YieldAfter
	if after < 0 {
		return
	}
	tick := time.NewTicker(min(max(after/10, 100*time.Millisecond), time.Second))
	defer tick.Stop()
	var asked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		down := n.linkDownFor()
		if down < after || time.Since(asked) < after {
			continue
		}
		to, whys := n.askYield(ctx)
		asked = time.Now() // the next ask comes YieldAfter after this one's end
		if to == "" {
			n.log.Warn("the PBX link is down, and no standby logs in either: keeping the lead, asking again later",
				"down_for", down.Round(time.Millisecond), "again_in", after, "standbys", strings.Join(whys, "; "))
			continue
		}
		if n.linkDownFor() == 0 {
			n.log.Info("the PBX link came back: keeping the lead", "standby", to)
			continue
		}
		n.log.Warn("the PBX link is down: yielding the lead to a standby that logs in", "down_for", down.Round(time.Millisecond), "to", to)
		if n.handLead(to) {
			return
		}
	}
}

// askYield asks the standbys whether they could lead and returns the
// first that could ("" when none), with the others' reasons.
func (n *Node) askYield(ctx context.Context) (to string, whys []string) {
	inbox := n.nc.NewRespInbox()
	sub, err := n.nc.SubscribeSync(inbox)
	if err != nil {
		return "", []string{"subscribe: " + err.Error()}
	}
	defer sub.Unsubscribe()
	if err := n.nc.PublishRequest(n.yieldSubject(), inbox, appendString([]byte{version}, n.cfg.Node)); err != nil {
		return "", []string{"request: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL+n.cfg.LeaseTTL/3)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if len(whys) == 0 {
				whys = []string{"no standby answered"}
			}
			return "", whys
		}
		d := decoder{b: m.Data}
		answer, node := d.byte(), d.string()
		switch {
		case d.err != nil:
		case answer == yieldYes:
			return node, whys
		case answer == yieldNo:
			whys = append(whys, node+": "+d.string())
		}
	}
}

// linkDownFor is how long the state this leader publishes has said the
// link is down (0 when it does not).
func (n *Node) linkDownFor() time.Duration {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	if n.downSince.IsZero() || n.handedOff {
		return 0
	}
	return time.Since(n.downSince)
}

// noteLink follows lastLink into downSince. pubMu held.
func (n *Node) noteLink() {
	switch {
	case n.lastLink != calls.LinkDown:
		n.downSince = time.Time{}
	case n.downSince.IsZero():
		n.downSince = time.Now()
	}
}
