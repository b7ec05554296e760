package calls

// The publish step: what changed since the last Publish, by collection,
// encoded and appended to the feed (the state it reads is snapshot.go's).

import (
	"slices"
	"strings"
)

// publish computes what changed since the last Publish, encodes only that,
// appends it to the feed and stores a new snapshot.
func (e *Engine) publish() *Snapshot {
	prev := e.snap.Load()
	now := e.nowMs()
	p := &e.pub
	p.exts.begin()
	p.queueCopied, p.parkCopied, p.trunkCopied, p.confCopied = false, false, false, false
	e.markDirtyOwners()
	ch := e.publishExts(e.changes[:0], now)
	clear(e.causes) // told, or of no conversation published
	ch = e.publishRinging(ch, now)
	ch = e.publishQueues(ch, prev, now)
	ch = e.publishParks(ch, now)
	ch = e.publishTrunks(ch, now)
	ch = e.publishConfs(ch, now)

	if len(ch) == 0 && !e.linkDirty {
		e.changes = ch
		return prev
	}
	e.version++
	s := p.snapshot(e, 0, now)
	if e.linkDirty {
		ch = append(ch, Change{Type: PBXStatus, Key: "pbx", Data: s.status, At: now})
		e.linkDirty = false
	}
	s.Seq = e.feed.append(ch)
	e.changes = ch
	clear(e.changes) // drop references to published bytes
	e.snap.Store(s)
	return s
}

// publishExts re-derives the dirty extensions; those whose view changed
// are encoded and announced.
func (e *Engine) publishExts(ch []Change, now int64) []Change {
	if len(e.dirtyExt) == 0 {
		return ch
	}
	e.devicesDirty()
	e.extKeys = appendSorted(e.extKeys[:0], e.dirtyExt)
	for _, k := range e.extKeys {
		x := e.exts[k]
		if x == nil {
			continue
		}
		old := x.pub // as published
		var prev map[string]Conversation
		if old != nil {
			prev = old.v.Conversations
		}
		v, kept := e.extView(x, prev)
		if old != nil && kept && extFieldsEqual(&old.v, &v) { // kept: the conversations equal the published ones
			continue
		}
		// Encoded in a buffer kept across Publishes, then copied at its
		// size: one allocation, no growing.
		xe := newEntCopied(v, now, e.cfg.Opaque, appendExtension, &e.scratch)
		e.storeExt(x, xe)
		// The presence change first: a batch's last seq stays the
		// extension's (clients of topic "extensions" see it).
		var was *Extension
		if old != nil {
			was = &old.v
		}
		ch = e.presenceChange(ch, was, &xe.v, now)
		h := xe.announceKeeping(old)
		h.(*feedRef[Extension]).hangups = e.hungUp(prev)
		ch = append(ch, Change{Type: ExtenUpdate, Key: k, Data: xe.full, At: now, ent: h})
	}
	resetSet(&e.dirtyExt)
	clear(e.extKeys) // keep no key alive
	return ch
}

// hungUp is the conversations of prev (an extension's, as published)
// whose own channel hung up since the last Publish, with the causes.
func (e *Engine) hungUp(prev map[string]Conversation) []Hangup {
	if len(e.causes) == 0 {
		return nil
	}
	var out []Hangup
	for _, c := range prev {
		if n, ok := e.causes[c.UniqueID]; ok {
			out = append(out, Hangup{UniqueID: c.UniqueID, Cause: n})
		}
	}
	slices.SortFunc(out, func(a, b Hangup) int { return strings.Compare(a.UniqueID, b.UniqueID) })
	return out
}

// publishRinging announces the extension channels that started ringing.
func (e *Engine) publishRinging(ch []Change, now int64) []Change {
	for _, c := range e.ringing {
		if c.gone {
			continue
		}
		cv := e.convFor(c)
		r := Ringing{Exten: c.owner, CallerNum: cv.CounterpartNum, CallerName: cv.CounterpartName,
			Queue: c.queue, Convid: cv.ID, PhonebookName: e.phonebookName(c.owner, cv.CounterpartNum)}
		ch = append(ch, valueChange(ExtenRinging, c.owner, r, now, "", appendRinging))
	}
	clear(e.ringing)
	e.ringing = e.ringing[:0]
	return ch
}

// publishQueues announces what changed in the queues that did
// (queuedelta.go), and the queue members that changed.
func (e *Engine) publishQueues(ch []Change, prev *Snapshot, now int64) []Change {
	if len(e.dirtyQueue) == 0 && len(e.dirtyMember) == 0 {
		return ch
	}
	p := &e.pub
	p.keys = appendSorted(p.keys[:0], e.dirtyQueue)
	for _, k := range p.keys {
		q := e.queues[k]
		if q == nil {
			continue
		}
		v, mc, wc := q.view()
		// Unchanged maps are the published ones (or equal to them: a
		// view that was not published was equal).
		old := p.queue.ents[k]
		if old != nil && queueSame(&old.v, &v, mc, wc) {
			continue
		}
		// The queue made whole on first need, from its members' pieces;
		// the feed gets what changed (queuedelta.go): the members a view
		// found changed, if known.
		x := newLazyEnt(v, now, e.cfg.Opaque, appendQueue)
		p.setQueue(k, x)
		var before map[string]*QueueMember
		if old != nil {
			before = old.v.Members
		}
		changed, known := q.members.changes()
		if !mc {
			changed, known = nil, true // the members are the published ones, or equal to them
		}
		d := newQueueDelta(before, &x.v, changed, !known, e.cfg.Opaque, x.announce(old))
		ch = append(ch, Change{Type: QueueMembers, Key: k, Data: d.full, At: now, ent: d})
	}
	resetSet(&e.dirtyQueue)
	clear(p.keys) // keep no key alive
	p.members = appendSortedFunc(p.members[:0], e.dirtyMember, cmpMemberKey)
	for _, k := range p.members {
		q := e.queues[k.queue]
		if q == nil {
			continue
		}
		mb, ok := q.members.get(k.member)
		if !ok {
			// Removed: its queue's change says so (queueUpdate without
			// it, queueMembers "removed"); an update of the member
			// would put it back in a client applying it.
			continue
		}
		if old := prev.Queues.Get(k.queue).Members[k.member]; old != nil && *old == mb {
			continue
		}
		b := make([]byte, 0, 176+len(mb.Queue)+len(mb.Member)+len(mb.Name)+len(mb.Type)+len(mb.PausedReason)) // its size unless escaped
		ch = append(ch, Change{Type: QueueMemberUpdate, Key: k.queue + "/" + k.member, Data: appendMemberUpdate(b, &mb), At: now})
	}
	resetSet(&e.dirtyMember)
	clear(p.members)
	return ch
}

func cmpMemberKey(a, b memberKey) int {
	if c := cmpString(a.queue, b.queue); c != 0 {
		return c
	}
	return cmpString(a.member, b.member)
}

// publishParks encodes the parking spaces that changed.
func (e *Engine) publishParks(ch []Change, now int64) []Change {
	p := &e.pub
	for _, k := range sortedSet(e.dirtyPark, cmpString) {
		ps := e.parks[k]
		if ps == nil {
			continue
		}
		v := ps.view()
		if old, ok := p.parks[k]; ok && parkingEqual(&old, &v) {
			continue
		}
		old := p.park.ents[k]
		x := newEnt(v, now, e.cfg.Opaque, appendParking, old.size())
		p.setPark(k, x)
		ch = append(ch, Change{Type: ParkingUpdate, Key: k, Data: x.full, At: now, ent: x.announce(old)})
	}
	resetSet(&e.dirtyPark)
	return ch
}

// publishTrunks re-derives the dirty trunks and announces what changed
// in those that did (trunkdelta.go): their entity, made whole on first
// need, goes to the snapshot.
func (e *Engine) publishTrunks(ch []Change, now int64) []Change {
	p := &e.pub
	p.keys = appendSorted(p.keys[:0], e.dirtyTrunk)
	for _, k := range p.keys {
		t := e.trunks[k]
		if t == nil {
			continue
		}
		v, convsChanged := e.trunkView(t)
		was := p.trunk.ents[k]
		var old ConvMap
		if was != nil {
			if !convsChanged && trunkFieldsEqual(&was.v, &v) {
				continue
			}
			old = was.v.Conversations
		}
		x := newLazyEnt(v, now, e.cfg.Opaque, appendTrunk)
		p.setTrunk(k, x)
		d := newTrunkDelta(old, &x.v, now, e.cfg.Opaque, x.announce(was))
		ch = append(ch, Change{Type: TrunkConversations, Key: k, Data: d.full, At: now, ent: d})
	}
	resetSet(&e.dirtyTrunk)
	clear(p.keys)
	return ch
}
