package bus

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/calls"
)

// Truth during a leader's death (docs/scale-out.md, "A silent leader").
// Between a leader's death and the takeover the state would still say
// live while nothing follows the PBX. So every node that does not lead
// watches the lease: when neither the lease's revision nor the stream
// moved for LeaseTTL/2 (the leader renews every LeaseTTL/3) and the state
// it serves is live, it publishes a stall marker, fenced on the last seq
// it applied. Every node replays the marker as SetLink(stalled) and a
// Publish at the marker's time, so every client sees pbxStatus stalled at
// the same seq. Several watchers race: the fence lets one marker in, the
// others are refused harmlessly; a marker can only land on live state.
//
// A leader that is alive after all (slow, not dead) sees the marker in
// the stream (when it applies them, or when its fenced publish is
// refused): its publishes adopt the markers stored after its last seq
// (anything else there still deposes it), and it publishes its link
// state again (restore), so the state is live again at a later seq; a
// second restore for the same marker changes nothing. Its primary engine
// never applies the marker: they differ only in the seq and the link's
// since-time, which its clients never read (they read the replaying
// replica).
//
// A node cut off from NATS (no lease read and nothing applied for
// LeaseTTL) can publish no marker: it answers not ready (Ready, /readyz)
// until it hears from NATS again; its clients are told its state is
// stale on its own say (unheard.go), its engine keeping it as it was.

// maxStalls bounds the markers a leader adopts in one fenced publish.
const maxStalls = 16

// stall is the marker: who saw the leader silent, and when.
type stall struct {
	Node string
	At   int64 // Unix ns: the engine's clock for SetLink and Publish
}

func (s stall) encode() []byte {
	b := []byte{version, kindStall}
	b = appendString(b, s.Node)
	return binary.AppendVarint(b, s.At)
}

func decodeStall(data []byte) (stall, error) {
	d := decoder{b: data}
	if k := d.header(); d.err == nil && k != kindStall {
		d.fail("kind %d is not stall", k)
	}
	s := stall{Node: d.string(), At: d.varint()}
	return s, d.err
}

// stall applies a marker: the link goes stalled at t, and the engine
// publishes. Engine goroutine only.
func (r *Replica) stall(t time.Time) {
	if r.shadow != nil {
		r.shadow.stall(t)
	}
	r.now = t
	r.eng.SetLink(calls.LinkStalled)
	r.eng.Publish()
}

// watchLeader runs until ctx ends; while this node does not lead, it
// publishes a stall marker when the leader is silent (see above).
func (n *Node) watchLeader(ctx context.Context, kv jetstream.KeyValue) {
	tick := time.NewTicker(n.cfg.LeaseTTL / 6)
	defer tick.Stop()
	var rev, seq uint64
	since, heard := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL/3)
		e, err := kv.Get(c, n.cfg.PBX)
		cancel()
		switch {
		case err == nil:
			heard = time.Now()
			if e.Revision() != rev {
				rev, since = e.Revision(), time.Now()
			}
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			heard = time.Now() // nobody leads: silence too
		default:
			// NATS out of reach or electing: the leader may be fine.
			since = time.Now()
		}
		if a := n.applied.Load(); a != seq {
			seq, since, heard = a, time.Now(), time.Now()
		}
		// Cut off from NATS, this node cannot mark its state stalled for
		// its clients: it stops saying it is ready.
		n.cutOff.Store(time.Since(heard) > n.cfg.LeaseTTL)
		if n.leading.Load() || time.Since(since) < n.cfg.LeaseTTL/2 {
			continue
		}
		if n.markStalled(ctx, seq) {
			since = time.Now()
		}
	}
}

// markStalled publishes a marker expecting the stream to end at seq, the
// last message this node applied, if the state it serves is live (read
// after seq: when the publish succeeds, nothing came after seq, so the
// state read is the one at seq).
func (n *Node) markStalled(ctx context.Context, seq uint64) bool {
	if !n.ready.Load() || n.cfg.Served.Engine().Snapshot().Link != calls.LinkLive {
		return false
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := n.js.Publish(c, n.subject, stall{Node: n.cfg.Node, At: time.Now().UnixNano()}.encode(), jetstream.WithExpectLastSequence(seq))
	if err != nil {
		if !isWrongSeq(err) {
			n.log.Info("leader silent: could not mark the state stalled", "err", err)
		}
		return false
	}
	n.m.stallsWritten.Add(1)
	n.log.Warn("leader silent: state marked stalled", "after_seq", seq, "for", n.cfg.LeaseTTL/2)
	return true
}

// applyStall replays a marker into Served (and Primary while following);
// a leader restores its link state.
func (n *Node) applyStall(seq uint64, data []byte, primary bool) error {
	s, err := decodeStall(data)
	if err != nil {
		return err
	}
	t := time.Unix(0, s.At)
	n.m.stallsApplied.Add(1)
	n.cfg.Served.stall(t)
	if primary && n.cfg.Primary != nil {
		n.cfg.Primary.stall(t)
	}
	n.log.Warn("pbx state marked stalled: the leader was silent", "by", s.Node, "seq", seq, "leading", n.leading.Load())
	if n.leading.Load() {
		n.signalStall()
	}
	return nil
}

// signalStall asks the leader's restoring goroutine to publish its link
// state again.
func (n *Node) signalStall() {
	select {
	case n.stalls <- struct{}{}:
	default:
	}
}

// restoring publishes the link state again after each marker, until ctx
// ends (a leader's goroutine).
func (n *Node) restoring(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.stalls:
		}
		n.pubMu.Lock()
		var err error
		if n.midLink {
			n.restorePending = true // after the batch's last chunk
		} else {
			err = n.publishRestore()
		}
		n.pubMu.Unlock()
		if err != nil {
			n.depose(err)
			return
		}
	}
}

// publishRestore publishes SetLink(the link state of the last batch) and
// Publish, as the leader's own ops message. pubMu held.
func (n *Node) publishRestore() error {
	b := []byte{version, kindOps, opSetLink}
	b = binary.AppendVarint(b, time.Now().UnixNano())
	b = append(b, byte(n.lastLink), opPublish, 0)
	n.log.Info("still leading: link state published again after a stall marker", "link", n.lastLink)
	return n.publish(b)
}

// publishBatch is the primary replica's flush: one batch or chunk, fenced.
func (n *Node) publishBatch(data []byte, final bool) error {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	if err := n.publish(data); err != nil {
		return err
	}
	if !final {
		n.midLink = n.midLink || linkOps(data)
		return nil
	}
	n.midLink = false
	// The engine published before flushing: its snapshot is this batch's.
	n.lastLink = n.cfg.Primary.Engine().Snapshot().Link
	n.noteLink()
	if n.restorePending {
		n.restorePending = false
		return n.publishRestore()
	}
	return nil
}

// linkOps reports whether an ops message holds an op that changes the
// link state (SetLink, BeginResync, EndResync: the engine changes it on
// no other); true when it does not decode.
func linkOps(data []byte) bool {
	found := false
	err := walkOps(data, func(op byte) bool {
		found = op == opSetLink || op == opBeginResync || op == opEndResync
		return !found
	})
	return found || err != nil
}

// skipStalls reports whether the stream holds only stall markers after
// this leader's last seq (a fenced publish was refused); if so it takes
// the stream's last seq as its own. pubMu held (or Run's goroutine
// before the lead).
func (n *Node) skipStalls() bool {
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	info, err := n.stream.Info(ctx)
	if err != nil || info.State.LastSeq <= n.pubSeq || info.State.LastSeq-n.pubSeq > maxStalls {
		return false
	}
	for seq := n.pubSeq + 1; seq <= info.State.LastSeq; seq++ {
		m, err := n.stream.GetMsg(ctx, seq)
		if err != nil {
			return false
		}
		if k, _, _, err := decodeControl(m.Data); err != nil || k != kindStall {
			return false
		}
	}
	n.log.Info("publish after stall markers", "markers", info.State.LastSeq-n.pubSeq, "stream_seq", info.State.LastSeq)
	n.m.adopted.Add(info.State.LastSeq - n.pubSeq)
	n.pubSeq = info.State.LastSeq
	// Restore now: Run may apply the markers late (a consumer behind).
	n.signalStall()
	return true
}
