package ws

import "github.com/ctibridge/ctibridge/calls"

// A replay pass: what resumes and snapshots' gaps replay during one pass
// of the hub (Run serving the requests queued at once, up to passMax, or
// a resync of every client) is shared among them as a fan-out shares a
// change among its clients. The feed's changes are read once, each
// replayed change is prepared once (prep: its frame in each class, per
// PBX set, a trunk's whole or delta) and its frames are queued to every
// client that gets them, and the entities' latest changes (latestOnly)
// are picked once per since and delta choice. What each client gets is
// what it got with a prep of its own (frameFor decides, as in a
// fan-out); only the frames' time (for the slowness check) is the
// pass's start rather than each resume's, at most one pass apart.
//
// The pass ends when Run's loop comes round (endPass), and whenever the
// hub has fanned out more (h.last moved) or the state's Unheard changed:
// its frames are never queued after their changes' newer ones.

// passMax is how many requests Run serves in one pass: bounds how long
// a reconnect storm holds back the fan-out (BenchmarkResume times a
// pass of 300 and 1,000 resumes).
const passMax = 128

// replayPass is the state of one pass, owned by Run.
type replayPass struct {
	open  bool
	last  uint64                   // h.last when cs was read
	snap  *calls.Snapshot          // the state's snapshot preps were made with (its Unheard: prepare)
	at    int64                    // hub clock of the pass's frames
	since uint64                   // cs: the feed's changes after since, up to last
	cs    []calls.Change           // read once, shared: preps point into it
	preps []prep                   // preps[i] is cs[i]'s once prepared (ch set)
	memo  [deltaAll + 1]latestMemo // latestOnly per deltas
}

// latestMemo is a latestOnly result: h.latest for since.
type latestMemo struct {
	ok     bool
	since  uint64
	latest []int // indexes in the changes after since
}

// keepPreps: a pass's preps beyond this many are let go at its end, not
// kept for the next (a long replay's would hold the frames' room).
const keepPreps = 1024

// endPass ends the replay pass: the next replay reads the feed again.
func (h *Hub) endPass() {
	r := &h.replay
	if !r.open {
		return
	}
	r.open = false
	r.cs, r.snap = nil, nil
	if cap(r.preps) > keepPreps {
		r.preps = nil
	} else {
		clear(r.preps)
		r.preps = r.preps[:0]
	}
	for i := range r.memo {
		r.memo[i].ok = false
	}
}

// replayed returns the changes after since up to h.last, for a replay
// made with the state's snapshot s, from the pass (started if need be);
// ok is false when the feed no longer holds them all.
func (h *Hub) replayed(since uint64, s *calls.Snapshot) (cs []calls.Change, ok bool) {
	r := &h.replay
	if r.open && (r.last != h.last || r.snap.Unheard != s.Unheard) {
		h.endPass()
	}
	if r.open && since >= r.since {
		return r.cs[since-r.since:], true // seqs are consecutive (calls.Feed)
	}
	all, ok := h.state.Feed().Since(since)
	if !ok {
		return nil, false
	}
	n := 0
	for n < len(all) && all[n].Seq <= h.last {
		n++
	}
	all = all[:n]
	if !consecutive(all, since) {
		h.endPass() // not the feed this pass read
		return all, true
	}
	if !r.open {
		r.open, r.last, r.snap, r.at = true, h.last, s, h.now()
	} else {
		// An earlier since: the pass's changes are the tail of these.
		// Keep what was prepared, under the new indexes.
		shift := int(r.since - since)
		preps := make([]prep, len(all))
		copy(preps[shift:], r.preps)
		r.preps = preps // the memos hold: each is of the changes after its since
	}
	r.since, r.cs = since, all
	if len(r.preps) < len(all) {
		r.preps = append(r.preps, make([]prep, len(all)-len(r.preps))...)
	}
	return all, true
}

// consecutive reports whether cs are the changes after since, one seq
// each.
func consecutive(cs []calls.Change, since uint64) bool {
	return len(cs) == 0 || cs[0].Seq == since+1 && cs[len(cs)-1].Seq == since+uint64(len(cs))
}

// replayPrep is change ch prepared for a replay made with snapshot s:
// once in the pass, ch being one of the changes replayed returned since
// the pass began.
func (h *Hub) replayPrep(ch *calls.Change, s *calls.Snapshot) *prep {
	r := &h.replay
	if i := ch.Seq - r.since - 1; r.open && ch.Seq > r.since && i < uint64(len(r.cs)) && &r.cs[i] == ch {
		p := &r.preps[i]
		if p.ch == nil {
			h.prepare(p, ch, r.at, r.snap)
		}
		return p
	}
	// Not the pass's (replayed found a feed other than the one it read):
	// a prep of its own.
	p := new(prep)
	h.prepare(p, ch, h.now(), s)
	return p
}

// replayLatest sets h.latest as latestOnly(cs, deltas) does, cs being
// the pass's changes after since, picked once per since and deltas in the
// pass.
func (h *Hub) replayLatest(cs []calls.Change, since uint64, deltas uint8) {
	m := &h.replay.memo[deltas]
	if h.replay.open && m.ok && m.since == since {
		h.latest = append(h.latest[:0], m.latest...)
		return
	}
	h.latestOnly(cs, deltas)
	if h.replay.open {
		m.ok, m.since, m.latest = true, since, append(m.latest[:0], h.latest...)
	}
}
