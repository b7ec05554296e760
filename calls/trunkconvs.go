package calls

import (
	"maps"
	"slices"
)

// A call centre's trunk holds hundreds of conversations at once (every
// outside caller, in a queue or talking, and every outbound call).
// Re-deriving and re-encoding all of them whenever one changed made a
// Publish cost what the trunk held: with 5,000 extensions, 2,000 calls
// and 60% of them on the trunk, 72% of the engine's time and 44 µs an
// event (BenchmarkApplyPublishAtScale/mix). So a trunk keeps what it
// derived per channel and the JSON of each conversation: Publish
// re-derives the conversations of the trunk's channels the batch touched
// (markOwner collects them; a channel's conversations follow from it
// and the channels linked with it, dirty.go), re-encodes a conversation
// only when it changed or its duration (whole seconds) moved on, and
// puts the trunk's JSON together from the pieces: the bytes appendTrunk
// would write. A full re-derivation is kept for what may change any
// conversation (a resync, an extension renamed: markDirtyOwners,
// markShowing) and for a trunk two of whose channels show one
// conversation (a trunk-to-trunk call: the last channel's wins, as in
// convsOf).
type trunkConvs struct {
	valid   bool                    // cur, owner and ids follow the channels but for touched
	shared  bool                    // two channels derived one conversation id: derive in full
	cur     map[string]Conversation // published (never written once published)
	owner   map[string]*channel     // the channel each conversation is derived from
	byChan  map[*channel][]string   // the conversation ids of each channel
	ids     []string                // cur's keys, sorted
	pieces  map[string]convPiece    // `"id":{...}` in the Full class, by id
	touched []*channel              // the trunk's channels this batch touched
	head    []byte                  // trunkJSON's scratch
}

type convPiece struct {
	answeredAt int64 // the conversation's (a piece is dropped when it changes)
	dur        int64 // the duration it was encoded with
	b          []byte
}

// trunkConvsOf brings t's conversations up to date with its touched
// channels and says whether they changed since the last call.
func (e *Engine) trunkConvsOf(t *trunkState) (map[string]Conversation, bool) {
	tc := &t.conv
	defer func() { clear(tc.touched); tc.touched = tc.touched[:0] }()
	if !tc.valid || tc.shared {
		return e.deriveTrunk(t)
	}
	next := tc.cur // cloned on the first change
	changed := false
	write := func() {
		if !changed {
			next, changed = maps.Clone(tc.cur), true
			if next == nil {
				next = map[string]Conversation{}
			}
		}
	}
	var now []string
	for _, c := range tc.touched {
		now = now[:0]
		if !c.gone {
			var dup bool
			e.chanConvs(c, func(cv Conversation) {
				if o := tc.owner[cv.ID]; o != nil && o != c || slices.Contains(now, cv.ID) {
					dup = true
				}
				now = append(now, cv.ID)
				if old, ok := next[cv.ID]; ok && convEqual(old, cv) {
					return
				}
				write()
				next[cv.ID] = cv
				delete(tc.pieces, cv.ID)
				tc.owner[cv.ID] = c
				if i, found := slices.BinarySearch(tc.ids, cv.ID); !found {
					tc.ids = slices.Insert(tc.ids, i, cv.ID)
				}
			})
			if dup {
				return e.deriveTrunk(t)
			}
		}
		for _, id := range tc.byChan[c] {
			if slices.Contains(now, id) {
				continue
			}
			write()
			delete(next, id)
			delete(tc.pieces, id)
			delete(tc.owner, id)
			if i, found := slices.BinarySearch(tc.ids, id); found {
				tc.ids = slices.Delete(tc.ids, i, i+1)
			}
		}
		if c.gone {
			delete(tc.byChan, c)
		} else {
			tc.byChan[c] = append(tc.byChan[c][:0], now...)
		}
	}
	tc.cur = next
	return next, changed
}

// deriveTrunk derives every conversation of t's channels, as convsOf.
func (e *Engine) deriveTrunk(t *trunkState) (map[string]Conversation, bool) {
	tc := &t.conv
	tc.valid, tc.shared = true, false
	tc.owner, tc.byChan = map[string]*channel{}, map[*channel][]string{}
	if tc.pieces == nil {
		tc.pieces = map[string]convPiece{}
	}
	var m map[string]Conversation
	if len(t.chans) > 0 {
		m = make(map[string]Conversation, len(t.chans))
	}
	for _, c := range t.chans {
		if c.gone {
			continue
		}
		e.chanConvs(c, func(cv Conversation) {
			if _, ok := m[cv.ID]; ok {
				tc.shared = true
			}
			m[cv.ID] = cv
			tc.owner[cv.ID] = c
			tc.byChan[c] = append(tc.byChan[c], cv.ID)
		})
	}
	changed := len(m) != len(tc.cur)
	for id, cv := range tc.cur {
		if w, ok := m[id]; !ok || !convEqual(w, cv) {
			delete(tc.pieces, id)
			changed = true
		}
	}
	tc.cur, tc.ids = m, sortedKeys(m)
	return m, changed
}

// trunkJSON is appendTrunk's bytes for v, t's view, conversations from
// the pieces kept (encoded again when missing or their duration moved
// on), written into a buffer of the exact size: a trunk's JSON is large,
// and growing it copied it whole.
func (e *Engine) trunkJSON(t *trunkState, v *Trunk, now int64, hint int) []byte {
	tc := &t.conv
	if !tc.valid || len(tc.ids) != len(v.Conversations) {
		return appendTrunk(make([]byte, 0, hint), v, now, enc{}) // not the conversations tc holds
	}
	head := appendKey(appendTrunkHead(tc.head[:0], v), "conversations")
	tail := append(appendPBX(head[len(head):], v.PBX), '}') // in head's spare room, when it has some
	tc.head = head
	size := len(head) + 2 + max(len(tc.ids)-1, 0) + len(tail)
	for _, id := range tc.ids {
		pc, ok := tc.pieces[id]
		if !ok || durationAt(pc.answeredAt, now) != pc.dur {
			cv := v.Conversations[id]
			pc = convPiece{answeredAt: cv.AnsweredAt, dur: cv.Duration(now), b: appendConvEntry(nil, id, &cv, now, enc{})}
			tc.pieces[id] = pc
		}
		size += len(pc.b)
	}
	b := append(make([]byte, 0, size), head...)
	b = append(b, '{')
	for i, id := range tc.ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, tc.pieces[id].b...)
	}
	b = append(b, '}')
	return append(b, tail...)
}

// trunkEnt is t's entity for v, encoded from its pieces.
func (e *Engine) trunkEnt(t *trunkState, v Trunk, now int64, hint int) *ent[Trunk] {
	x := &ent[Trunk]{v: v, at: now, encode: appendTrunk, op: e.cfg.Opaque}
	x.full = e.trunkJSON(t, &x.v, now, hint)
	return x
}
