package calls

import "slices"

// Which owners Publish re-derives. A conversation is derived from its
// owner's channels and the channels they are linked with (bridge members,
// the talking bridge left for a consult, dial targets and the dialler,
// Local channel partners, transfer parties, the spied channel), so a
// channel event can change the view of any owner linked with the channel,
// and no other. changed records the channel and, at once, the channels
// linked with it then (the links a hangup or a bridge leave is about to
// cut); Publish adds the channels linked with any of them at the end of
// the batch. The owners of all of those are re-derived, nothing else: the
// cost of a Publish follows what the batch touched, not how many calls are
// up. An extension's display name, shown by whoever talks to it, is read
// outside the channel graph: renaming one re-derives the owners linked with
// its channels and those showing its number (renamed); a resync, which may
// rewrite anything, re-derives every owner with channels (rederiveAll).

// changed marks a channel, and the channels linked with it now, for
// re-derivation of their owners at Publish.
func (e *Engine) changed(c *channel) {
	if c.touched == e.touchGen {
		return
	}
	start := len(e.touched)
	e.touch(c)
	for i := start; i < len(e.touched); i++ {
		e.touchLinks(e.touched[i])
	}
}

// touch adds c to the channels touched in this batch.
func (e *Engine) touch(c *channel) {
	if c != nil && c.touched != e.touchGen {
		c.touched = e.touchGen
		e.touched = append(e.touched, c)
	}
}

// touchLinks touches every channel c is linked with.
func (e *Engine) touchLinks(c *channel) {
	if b := c.bridge; b != nil {
		for _, x := range b.members {
			e.touch(x)
		}
	}
	if b := c.prevBridge; b != nil {
		for _, x := range b.members {
			e.touch(x)
		}
	}
	for _, x := range c.dialTargets {
		e.touch(x)
	}
	e.touch(c.dialledBy)
	e.touch(c.partner)
	if c.m == nil {
		return
	}
	e.touch(c.m.spyee)
	if x := c.m.xfer; x != nil {
		e.touch(x.transferer)
		e.touch(x.transferee)
		e.touch(x.target)
		if x.held != nil {
			for _, y := range x.held.members {
				e.touch(y)
			}
		}
	}
}

// leaveBridge takes c out of its bridge; those who stay are touched: their
// counterpart is gone.
func (e *Engine) leaveBridge(c *channel) {
	b := c.bridge
	if b == nil {
		return
	}
	for _, x := range b.members {
		e.changed(x)
	}
	b.remove(c)
	c.bridge = nil
}

// renamed is called after something that may change x's display name:
// when it did, the conversations that may show it are re-derived: those
// linked with x's channels, and at Publish those whose counterpart number
// is x's.
func (e *Engine) renamed(x *extState, before string) {
	if x.displayName() == before {
		return
	}
	for _, c := range x.chans {
		e.changed(c)
	}
	e.renamedExts[x.exten] = struct{}{}
	for _, d := range e.userDevs[x.exten] {
		e.dirtyExt[d] = struct{}{} // named after their user
	}
}

// markShowing marks the owners whose published conversations show a
// renamed extension's number: extensions from the published map's index
// of the numbers shown (extWriter.shows), trunks (a few) by a scan.
func (e *Engine) markShowing() {
	if len(e.renamedExts) == 0 {
		return
	}
	for n := range e.renamedExts {
		for k := range e.pub.exts.showing(n) {
			e.dirtyExt[k] = struct{}{}
		}
	}
	for k, t := range e.busyTrk {
		if showsAny(TrunkMap{e.pub.trunk}.Get(k).Conversations, e.renamedExts) {
			e.dirtyTrunk[k] = struct{}{}
			t.conv.valid = false
		}
	}
	resetSet(&e.renamedExts)
}

func showsAny(convs ConvMap, nums map[string]struct{}) bool {
	for _, cv := range convs.All() {
		if _, ok := nums[cv.CounterpartNum]; ok {
			return true
		}
	}
	return false
}

// markDirtyOwners closes the batch's touched channels over their links at
// the end of the batch and marks their owners (or, after rederiveAll,
// every owner with channels) for re-derivation.
func (e *Engine) markDirtyOwners() {
	for i := 0; i < len(e.touched); i++ {
		e.touchLinks(e.touched[i])
	}
	for s := range e.spiers {
		switch t := s.get().spyee; {
		case s.gone || t == nil:
			delete(e.spiers, s)
		case t.touched == e.touchGen:
			e.touch(s) // the spy shows whether its spyee is still there
		}
	}
	for _, c := range e.touched {
		e.markOwner(c)
	}
	e.markShowing()
	if e.rederiveAll {
		for k := range e.busyExt {
			e.dirtyExt[k] = struct{}{}
		}
		for k, t := range e.busyTrk {
			e.dirtyTrunk[k] = struct{}{}
			t.conv.valid = false
		}
		e.rederiveAll = false
	}
	clear(e.touched)
	e.touched = e.touched[:0]
	e.touchGen++
}

func (e *Engine) markOwner(c *channel) {
	switch c.kind {
	case ownerExt:
		e.dirtyExt[c.owner] = struct{}{}
	case ownerTrunk:
		e.dirtyTrunk[c.owner] = struct{}{}
		if t := e.trunks[c.owner]; t != nil {
			t.conv.touched = append(t.conv.touched, c) // once: touched holds a channel once a batch
		}
	}
}

// appendSorted appends m's keys to dst, sorted: the caller keeps dst
// across Publishes, so sorting a batch's dirty keys allocates nothing.
func appendSorted(dst []string, m map[string]struct{}) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

// appendSortedFunc is appendSorted of any keys, in cmp's order.
func appendSortedFunc[K comparable](dst []K, m map[K]struct{}, cmp func(a, b K) int) []K {
	for k := range m {
		dst = append(dst, k)
	}
	slices.SortFunc(dst, cmp)
	return dst
}

// resetSet empties a dirty set for the next batch. A set that held many
// keys (a resync dirties every owner) is replaced, not cleared: a cleared
// map keeps its table, and ranging over it costs the table's size, so
// every later Publish would pay for the resync (ranging over a table sized
// for every owner to find the few keys of one call's end and another's
// start).
func resetSet[K comparable](m *map[K]struct{}) {
	if len(*m) > 64 {
		*m = map[K]struct{}{}
		return
	}
	clear(*m)
}
