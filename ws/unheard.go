package ws

import (
	"time"

	"github.com/ctibridge/ctibridge/calls"
)

// When the node says on its own that it cannot hear its stream (a
// LocalState's Unheard, package bus), or that it hears it again, a
// client gets either a snapshot (the state as the node says it, stale
// and stalled under the unheard epoch, then live under the hub's) or,
// when it asked for status deltas ("deltas":["status"]), a pbxStatus
// event at its own seq, taking none: the node's status then, stalled or
// what the state says. Such a client must accept a pbxStatus whose seq
// is the one before it (docs/websocket.md); one that does not ask keeps
// the snapshots, as a client that drops an event whose seq does not grow
// would go on showing the link live. For the status deltas to stay true:
//
//   - while Unheard, each pbxStatus change of the feed (a catch-up's) is
//     sent to them as the node says it, stalled (frameFor), not as the
//     change says it, and to the others not at all;
//   - "resumed" is followed by the node's status at since (resume): a
//     client told stalled out of the feed, here or on another node,
//     learns the status the feed since its seq need not hold;
//   - a client whose last snapshot was Unheard (it subscribed, or was
//     resent one, while the node could not hear) gets a snapshot on
//     hearing again all the same: it holds the unheard epoch, from which
//     nobody resumes.

// localFlip serves a change of the node's say (LocalChanged): a snapshot
// or a status delta to every subscribed client.
func (h *Hub) localFlip() {
	s := h.state.Snapshot()
	var shared *frame // the status at h.last of the clients of every PBX
	for _, c := range h.clients {
		if !c.subscribed {
			continue
		}
		if !c.statusDeltas || c.unheardSnap {
			h.resync(c, "local")
			continue
		}
		seq := max(c.base, h.last)
		var f *frame
		if seq == h.last && !c.pbxLimited() {
			if shared == nil {
				shared = h.statusFrameAt(c, s, seq)
			}
			f = shared
		} else {
			f = h.statusFrameAt(c, s, seq)
		}
		c.mu.Lock()
		if c.closing == nil {
			c.push(f)
			h.queue(c)
		}
		c.mu.Unlock()
		if h.writers.n >= dispatchEvery {
			h.writers.dispatch()
		}
	}
	h.writers.dispatch()
}

// statusFrameAt is the pbxStatus event of snapshot s's status as c gets
// it, at seq: out of the feed, coalesced with the feed's pbxStatus.
func (h *Hub) statusFrameAt(c *conn, s *calls.Snapshot, seq uint64) *frame {
	data := s.StatusJSON()
	if c.pbxLimited() {
		data = s.StatusFor(c.seesPBXName)
	}
	ch := calls.Change{Seq: seq, Type: calls.PBXStatus, Key: "pbx", At: time.Now().UnixMilli()}
	return &frame{b: eventFrame(&ch, data), seq: seq, ent: h.entID(entKey{calls.PBXStatus, ch.Key}), at: h.now(), msgs: 1}
}
