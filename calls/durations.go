package calls

// Live durations. A conversation's JSON carries "duration", the talk time
// in whole seconds when it was encoded; Publish encodes an entity only when
// its value changes, so without more the duration of a call nobody touches
// would freeze at its last state change. RefreshDurations re-encodes, at
// most once a second, the extensions and trunks that hold an answered
// conversation and stores a new snapshot with them; nothing goes to the
// feed (clients tick from answeredAt, and a change per call and second
// would flood every WebSocket client for no new fact).

// durationEvery is the shortest time between two refreshes, in ms: a
// little under a second, so a ticker's jitter cannot make a one-second
// ticker skip a beat (a skipped beat would leave durations two seconds old).
const durationEvery = 900

// RefreshDurations re-encodes every extension and trunk with an answered
// conversation when the last refresh is at least 0.9 s old, and stores
// a new snapshot (Version+1, same Seq) when it re-encoded any. It appends
// nothing to the feed. The link owner calls it about once a second; calls
// closer together than that do nothing.
func (e *Engine) RefreshDurations() *Snapshot {
	prev := e.snap.Load()
	now := e.nowMs()
	if now-e.durAt < durationEvery && now >= e.durAt {
		return prev
	}
	e.durAt = now
	p := &e.pub
	// Copy-on-write, as Publish does: the values do not change, only
	// their encodings; what the previous snapshot holds stays as it is.
	p.exts.begin()
	p.trunkCopied = false
	n, trunks := 0, 0
	for k := range e.busyExt { // the extensions that have channels
		x := e.exts[k]
		if x == nil || x.pub == nil || !anyAnswered(x.pub.v.Conversations) {
			continue
		}
		old := x.pub
		e.storeExt(x, old.refreshed(newEnt(old.v, now, e.cfg.Opaque, appendExtension, old.size()+8)))
		n++
	}
	for k, old := range p.trunk.ents { // trunks are few; setTrunk writes a copy
		if !old.v.Conversations.anyAnswered() {
			continue
		}
		// Nothing is encoded: the trunk is put together from its
		// conversations' pieces, with their durations at now, when read.
		p.setTrunk(k, old.refreshed(newLazyEnt(old.v, now, e.cfg.Opaque, appendTrunk)))
		trunks++
	}
	n += trunks
	if n == 0 {
		return prev
	}
	e.version++
	s := p.snapshot(e, prev.Seq, now)
	e.snap.Store(s)
	return s
}

func anyAnswered(m map[string]Conversation) bool {
	for _, c := range m {
		if c.AnsweredAt != 0 {
			return true
		}
	}
	return false
}
