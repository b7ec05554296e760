package calls

import (
	"cmp"
	"slices"
)

// A call centre's trunk holds hundreds of conversations at once (every
// outside caller, in a queue or talking, and every outbound call).
// Re-deriving all of them whenever one changed made a Publish cost what
// the trunk held. So a trunk keeps which of its channels each
// conversation is derived from: Publish re-derives the conversations of
// the trunk's channels the batch touched (markOwner collects them; a
// channel's conversations follow from it and the channels linked with
// it, dirty.go) and changes those in its ConvMap (convmap.go), which
// shares everything else with the snapshot before. A full re-derivation
// is kept for what may change any conversation (a resync, an extension
// renamed: markDirtyOwners, markShowing).
//
// Two of a trunk's channels can show one conversation: an outside caller
// forwarded to a cellphone has both legs on the trunk, and both derive
// the id "<inbound channel>><outbound channel>". The trunk shows the
// conversation of the channel created last (the trunk's derivation in
// full, trunkConvsFull, is the reference); the others are kept beside it
// (more), so that when that channel lets the id go, the next one's is
// shown, without re-deriving the trunk.
type trunkConvs struct {
	valid   bool                  // owner, more and byChan follow the channels but for touched
	w       convWriter            // w.m: the conversations as published
	owner   map[string]shown      // the channel each conversation is shown from, and its item
	more    map[string][]*channel // every channel deriving an id that several derive
	byChan  map[*channel][]string // the conversation ids of each channel
	touched []*channel            // the trunk's channels this batch touched
	now     []Conversation        // scratch: one channel's conversations
	next    []Conversation        // scratch: the conversations of the channel showing an id next (dropOwner)
	drop    []string              // scratch: the ids it let go
	full    int                   // derivations in full (tests)
}

// shown is the channel a conversation is shown from, and the item w.m
// holds for it when put last stored one (nil: look it up).
type shown struct {
	c  *channel
	it *convItem
}

// trunkConvsOf brings t's conversations up to date with its touched
// channels and says whether they changed since the last call.
func (e *Engine) trunkConvsOf(t *trunkState) (ConvMap, bool) {
	tc := &t.conv
	defer func() { clear(tc.touched); tc.touched = tc.touched[:0] }()
	tc.w.begin(tc.w.m)
	if !tc.valid {
		e.deriveTrunk(t)
	} else {
		for _, c := range tc.touched {
			e.rederiveChan(tc, c)
		}
	}
	clear(tc.now)
	clear(tc.next)
	return tc.w.m, tc.w.changed
}

// derived is c's conversations in *buf, a scratch slice of tc's, one per
// id (the later of two with one id, as convsOf keeps it).
func (e *Engine) derived(buf *[]Conversation, c *channel) []Conversation {
	now := (*buf)[:0]
	if c.gone {
		*buf = now
		return nil
	}
	e.chanConvs(c, func(cv Conversation) {
		if i := slices.IndexFunc(now, func(x Conversation) bool { return x.ID == cv.ID }); i >= 0 {
			now[i] = cv
			return
		}
		now = append(now, cv)
	})
	*buf = now
	return now
}

// rederiveChan re-derives touched channel c's conversations.
func (e *Engine) rederiveChan(tc *trunkConvs, c *channel) {
	now := e.derived(&tc.now, c) // dropOwner derives in tc.next: now stays c's
	old := tc.byChan[c]
	for _, id := range old {
		if !slices.ContainsFunc(now, func(x Conversation) bool { return x.ID == id }) {
			tc.drop = append(tc.drop, id)
		}
	}
	for _, id := range tc.drop {
		e.dropOwner(tc, id, c)
	}
	clear(tc.drop)
	tc.drop = tc.drop[:0]
	ids := old[:0]
	for _, cv := range now {
		if tc.addOwner(cv.ID, c) {
			e.put(tc, cv)
		}
		ids = append(ids, cv.ID)
	}
	if len(ids) == 0 {
		delete(tc.byChan, c)
	} else {
		tc.byChan[c] = ids
	}
}

// addOwner notes that c derives conversation id, and says whether c
// shows it.
func (tc *trunkConvs) addOwner(id string, c *channel) bool {
	s := tc.owner[id]
	switch o := s.c; {
	case o == nil:
		tc.owner[id] = shown{c: c}
	case o != c:
		m := tc.more[id]
		if m == nil {
			m = []*channel{o}
		}
		if !slices.Contains(m, c) {
			m = append(m, c)
		}
		tc.more[id] = m
		if c.seq <= o.seq {
			return false
		}
		s.c = c
		tc.owner[id] = s
	}
	return true
}

// dropOwner notes that c no longer derives conversation id: it goes, or
// the next channel deriving it shows it.
func (e *Engine) dropOwner(tc *trunkConvs, id string, c *channel) {
	m, shared := tc.more[id]
	if !shared {
		if tc.owner[id].c == c {
			delete(tc.owner, id)
			tc.w.del(id)
		}
		return
	}
	m = slices.DeleteFunc(m, func(x *channel) bool { return x == c })
	var win *channel
	for _, x := range m {
		if win == nil || x.seq > win.seq {
			win = x
		}
	}
	if len(m) > 1 {
		tc.more[id] = m
	} else {
		delete(tc.more, id)
	}
	s := tc.owner[id]
	if s.c != c {
		return
	}
	s.c = win
	tc.owner[id] = s
	// win's conversation as it is now; when win no longer derives it, win
	// was touched too and drops it in its turn.
	for _, cv := range e.derived(&tc.next, win) {
		if cv.ID == id {
			e.put(tc, cv)
		}
	}
}

// put stores cv, whose id has an owner, unless it is what the trunk
// shows already.
func (e *Engine) put(tc *trunkConvs, cv Conversation) {
	s := tc.owner[cv.ID]
	it := s.it
	if it == nil {
		it = tc.w.m.item(cv.ID)
	}
	if it != nil && convEqual(it.cv, cv) {
		return
	}
	s.it = newConvItem(cv)
	tc.w.set(s.it)
	tc.owner[cv.ID] = s
}

// deriveTrunk derives every conversation of t's channels, keeping the
// pieces of those that did not change.
func (e *Engine) deriveTrunk(t *trunkState) {
	tc := &t.conv
	tc.valid = true
	tc.full++
	tc.owner, tc.more, tc.byChan = map[string]shown{}, map[string][]*channel{}, map[*channel][]string{}
	for _, c := range t.chans {
		for _, cv := range e.derived(&tc.now, c) {
			tc.addOwner(cv.ID, c)
			tc.byChan[c] = append(tc.byChan[c], cv.ID)
		}
	}
	var gone []string
	for it := range tc.w.m.items {
		if tc.owner[it.cv.ID].c == nil {
			gone = append(gone, it.cv.ID)
		}
	}
	for _, id := range gone {
		tc.w.del(id)
	}
	for c, ids := range tc.byChan {
		for _, cv := range e.derived(&tc.now, c) {
			if slices.Contains(ids, cv.ID) && tc.owner[cv.ID].c == c {
				e.put(tc, cv)
			}
		}
	}
}

// trunkConvsFull derives the conversations of a trunk's channels from
// scratch: convsOf's, the channel created last showing an id several
// derive. The reference the kept conversations must equal (tests).
func (e *Engine) trunkConvsFull(chans []*channel) map[string]Conversation {
	return e.convsOf(slices.SortedFunc(slices.Values(chans), func(a, b *channel) int { return cmp.Compare(a.seq, b.seq) }))
}
