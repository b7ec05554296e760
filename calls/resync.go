package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// resyncState tracks a running resynchronisation.
type resyncState struct {
	active bool
	gen    uint64 // incremented by BeginResync; channels carry the gen they were last seen in
	// roomsListed: a ConfbridgeListRooms item arrived in the running resync
	roomsListed bool
}

func (e *Engine) setLink(s LinkState) {
	if s == LinkResyncing && !e.resync.active {
		// SetLink(LinkResyncing) is how a link owner says "connected, lists
		// coming": it starts a resync as BeginResync does.
		e.beginResync()
		return
	}
	e.changeLink(s)
}

func (e *Engine) changeLink(s LinkState) {
	if s == e.link {
		return
	}
	e.link = s
	e.linkSince = e.nowMs()
	e.linkDirty = true
	if s == LinkDown {
		e.resync.active = false
	}
}

func (e *Engine) beginResync() {
	e.changeLink(LinkResyncing)
	e.resync.active = true
	e.resync.gen++
	e.resetMissing()
	for _, c := range e.chans {
		c.confirmed = false
	}
	for _, q := range e.queues {
		q.listed, q.listedMembers, q.listedWaiting = false, nil, nil
	}
	for _, p := range e.parks {
		p.listed = false
	}
	e.beginConfResync()
}

func (e *Engine) endResync() {
	if e.resync.active {
		e.resync.active = false
		repairs := 0
		for _, c := range e.sortedChans() {
			if !c.confirmed && c.gen < e.resync.gen {
				e.dropChannel(c) // a ghost: gone while we were not looking
				repairs++
			}
		}
		for _, q := range e.queues {
			if q.listed {
				for k := range q.members {
					if !q.listedMembers[k] {
						delete(q.members, k)
						e.dirtyMember[memberKey{q.name, k}] = struct{}{}
						e.dirtyQueue[q.name] = struct{}{}
						repairs++
					}
				}
			}
			for k := range q.waiting {
				if (q.listed && !q.listedWaiting[k]) || e.byName[k] == nil {
					delete(q.waiting, k)
					e.dirtyQueue[q.name] = struct{}{}
					repairs++
				}
			}
			q.listed, q.listedMembers, q.listedWaiting = false, nil, nil
		}
		for _, p := range e.parks {
			if p.caller != nil && e.byName[p.caller.Channel] == nil {
				p.caller = nil
				e.dirtyPark[p.space] = struct{}{}
				repairs++
			}
			p.listed = false
		}
		repairs += e.endConfResync()
		e.stats.DriftRepairs += uint64(repairs)
		e.lastReconMark = e.chanSeq + 1
		e.pruneBridges()
	}
	e.changeLink(LinkLive)
}

// sortedChans lists the channels in creation order, for deterministic
// repairs.
func (e *Engine) sortedChans() []*channel {
	out := make([]*channel, 0, len(e.chans))
	for _, c := range e.chans {
		out = append(out, c)
	}
	for i := 1; i < len(out); i++ { // insertion sort: lists are short and mostly ordered
		for j := i; j > 0 && out[j].seq < out[j-1].seq; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// parseDuration reads CoreShowChannel's Duration "HH:MM:SS" (or seconds).
func parseDuration(s string) int64 {
	var total int64
	for part := range strings.SplitSeq(s, ":") {
		total = total*60 + int64(atoi(part))
	}
	return total
}

// onCoreShowChannel applies one CoreShowChannels item: it confirms a known
// channel (and corrects its bridge) or adds a missing one.
func (e *Engine) onCoreShowChannel(m ami.Message) {
	e.stats.DriftRepairs += uint64(e.applyListedChannel(m))
}

// applyListedChannel returns the number of repairs it made.
func (e *Engine) applyListedChannel(m ami.Message) int {
	uid, name := m.Get("Uniqueid"), m.Get("Channel")
	if uid == "" || name == "" || e.tombs.has(uid) {
		return 0 // hung up since the list was taken: never resurrect
	}
	repairs := 0
	c := e.chans[uid]
	if c == nil {
		if old := e.byName[name]; old != nil {
			e.dropChannel(old)
		}
		c = e.newChannel(m, uid, name)
		c.created = e.nowMs() - parseDuration(m.Get("Duration"))*1000
		switch app := m.Get("Application"); {
		case app == "AppDial" || app == "AppQueue":
			c.originated = true // it was dialled: incoming for its owner
			c.originator = false
		case app == "Dial" || app == "Queue":
			c.dialledOut = app == "Dial"
			c.originator = true
		}
		if c.kind == ownerExt && known(c.callerName) {
			if x := e.exts[c.owner]; x != nil && c.callerNum == c.owner {
				x.pbxName = strings.Clone(c.callerName)
			}
		}
		repairs++
	} else {
		e.updateCommon(c, m)
	}
	c.confirmed = true
	c.gen = e.resync.gen
	bid := m.Get("BridgeId")
	switch {
	case bid == "" && c.bridge != nil:
		c.bridge.remove(c)
		c.bridge = nil
		e.changed(c)
		repairs++
	case bid != "" && (c.bridge == nil || c.bridge.id != bid):
		b := e.bridges[bid]
		if b == nil {
			b = &bridge{id: bid}
			e.bridges[bid] = b
		}
		answered := c.answeredAt
		e.joinBridge(c, b)
		if answered == 0 && c.answeredAt != 0 {
			// Joined its peer from a list: the answer time is unknown, the
			// channel's start is the best bound we have.
			for _, x := range b.members {
				if x.answeredAt > x.created && x.created > 0 {
					x.answeredAt = x.created
				}
			}
		}
		repairs++
	}
	return repairs
}

func (e *Engine) beginReconcile() { e.reconMark = e.chanSeq + 1 }

func (e *Engine) reconcile(items []ami.Message) int {
	// Only channels older than the list may be judged by it. BeginReconcile
	// marks that moment exactly; without it, only channels that already
	// existed at the previous Reconcile (or EndResync) are candidates, so a
	// call set up while the list was in flight is never dropped (a ghost
	// then lives one period longer).
	mark := e.reconMark
	if mark == 0 {
		mark = e.lastReconMark
	}
	e.reconMark = 0
	e.lastReconMark = e.chanSeq + 1
	listed := make(map[string]bool, len(items))
	repairs := 0
	for _, m := range items {
		if m.Event() != "CoreShowChannel" {
			continue
		}
		listed[m.Get("Uniqueid")] = true
		repairs += e.applyListedChannel(m)
	}
	for _, c := range e.sortedChans() {
		if !listed[c.uid] && c.seq < mark {
			e.dropChannel(c)
			repairs++
		}
	}
	e.stats.DriftRepairs += uint64(repairs)
	e.pruneBridges()
	return repairs
}

// pruneBridges forgets empty bridges whose BridgeDestroy was missed.
func (e *Engine) pruneBridges() {
	for id, b := range e.bridges {
		if len(b.members) == 0 {
			delete(e.bridges, id)
		}
	}
}
