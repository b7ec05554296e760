package ws

import (
	"slices"
	"time"

	"github.com/ctibridge/ctibridge/calls"
)

// The hub's side of a subscription: what it queues for a client that
// subscribes, resumes, or has to be brought up to date again.

// resync replaces whatever state is queued for c by a fresh snapshot.
func (h *Hub) resync(c *conn, reason string) {
	c.mu.Lock()
	c.dropState()
	c.mu.Unlock()
	h.sendSnapshot(c, reason)
}

// sendSnapshot queues a snapshot for c, and the changes the hub has fanned
// out that the snapshot does not hold yet (the engine stores a snapshot
// just after appending its changes to the feed, so the hub can be ahead).
// Changes up to c.base are then skipped by fanout.
func (h *Hub) sendSnapshot(c *conn, reason string) {
	s := h.state.Snapshot()
	f := h.snapshotFrame(c, s, h.now())
	var gap []calls.Change
	if s.Seq < h.last {
		gap, _ = h.replayed(s.Seq, s)
	}
	c.base = max(s.Seq, h.last)
	c.unheardSnap = s.Unheard
	c.mu.Lock()
	c.push(f)
	for i := range gap {
		if g := h.frameFor(c, h.replayPrep(&gap[i], s)); g != nil {
			c.push(g)
		}
	}
	c.kick()
	c.mu.Unlock()
	h.m.snapshots.WithLabelValues(reason).Inc()
}

// resume queues the changes after since for c, when the feed still holds
// them all and they are few and recent enough; it reports whether it did.
func (h *Hub) resume(c *conn, since uint64) bool {
	s := h.state.Snapshot()
	if since > h.last || s.Unheard {
		return false // while Unheard, a snapshot (LocalState)
	}
	cs, ok := h.replayed(since, s)
	if !ok || len(cs) > h.cfg.ReplayMax {
		return false
	}
	if len(cs) > 0 && cs[0].At < time.Now().Add(-h.cfg.ReplayMaxAge).UnixMilli() {
		return false
	}
	h.replayLatest(cs, since, c.deltas)
	b := newPayload(64)
	b = append(b, `{"op":"resumed","since":`...)
	b = appendUint(b, since)
	b = append(b, `,"seq":`...)
	b = appendUint(b, h.last)
	b = append(b, '}')
	c.base, c.unheardSnap = h.last, false
	c.mu.Lock()
	c.push(&frame{b: finish(b, opText), seq: since, at: h.now(), msgs: 1, kind: frameResumed})
	if c.statusDeltas {
		// It may have been told stale out of the feed (unheard.go), by
		// this node or another: the node's status, at since.
		c.push(h.statusFrameAt(c, s, since))
	}
	for _, i := range h.latest {
		if f := h.frameFor(c, h.replayPrep(&cs[i], s)); f != nil {
			c.push(f)
		}
	}
	c.kick()
	c.mu.Unlock()
	h.m.resumes.Inc()
	return true
}

// latestOnly sets h.latest to the indexes in cs of the changes a replay
// sends, in order: each entity's latest and every notification. The
// queue would replace the others anyway; skipping them first bounds what
// a resume costs by the number of entities, not the replay's length. A
// client taking deltas of a topic (deltas) gets every delta change of it:
// each says what changed since the one before.
func (h *Hub) latestOnly(cs []calls.Change, deltas uint8) {
	h.latest = h.latest[:0]
	for i := len(cs) - 1; i >= 0; i-- {
		if k := cs[i].Type.Entity(); k != calls.ExtenRinging && k != calls.ChangeNone && deltas&deltaOf(cs[i].Type) == 0 {
			e := entKey{k, cs[i].Key}
			if _, dup := h.seen[e]; dup {
				continue
			}
			h.seen[e] = struct{}{}
		}
		h.latest = append(h.latest, i)
	}
	clear(h.seen)
	slices.Reverse(h.latest)
}
