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

	// A list describes the PBX at the moment it was asked for, while live
	// events keep coming, and the two paths lose their relative order: a
	// list item may be applied after live events that are newer than it.
	// So live events stamp what they set with events (a counter of
	// messages applied), and an item never overrides what was stamped
	// after mark, the count when the lists were asked for.
	events uint64
	mark   uint64

	// pending keeps, by Uniqueid, the live events about channels the
	// engine does not know while a resync runs: after a reconnect, a call
	// set up while the link was down is known only once its
	// CoreShowChannel item is applied, and its events in between (a
	// BridgeEnter after the list was taken) would otherwise be lost. They
	// are applied again, in order, right after the item creates the
	// channel. Bounded by maxPendingEvents; dropped at EndResync.
	pending  map[string][]ami.Message
	npending int
}

// maxPendingEvents bounds the events kept for channels not listed yet.
const maxPendingEvents = 8192

// keepForList stashes m if it is about a channel the engine does not
// know while a resync runs (see resyncState.pending).
func (e *Engine) keepForList(m ami.Message, ev string) {
	if ev == ami.EventNewchannel || ev == ami.EventHangup || ev == ami.EventCoreShowChannel || e.resync.npending >= maxPendingEvents {
		return
	}
	for _, p := range [...]string{"", "Dest"} {
		if _, ok := m.Lookup(p + "ChannelState"); !ok {
			continue // not a channel event (Cdr, queue and device events ...)
		}
		uid := m.Get(p + "Uniqueid")
		if uid == "" || e.chans[uid] != nil || e.tombs.has(uid) {
			continue
		}
		if e.resync.pending == nil {
			e.resync.pending = map[string][]ami.Message{}
		}
		e.resync.pending[uid] = append(e.resync.pending[uid], m)
		e.resync.npending++
	}
}

// replayPending applies again the events kept for a channel a list item
// has just created.
func (e *Engine) replayPending(uid string) {
	ms := e.resync.pending[uid]
	if len(ms) == 0 {
		return
	}
	delete(e.resync.pending, uid)
	for _, m := range ms {
		e.apply(m)
	}
}

// stampQueue records, during a resync, that a live event changed a
// queue's member (waiting false) or waiting caller (waiting true) key.
func (e *Engine) stampQueue(q *queueState, m ami.Message, waiting bool, key string) {
	if !e.resync.active || m.ActionID() != "" || key == "" {
		return
	}
	at := &q.memberAt
	if waiting {
		at = &q.waitingAt
	}
	if *at == nil {
		*at = map[string]uint64{}
	}
	(*at)[key] = e.resync.events
}

// staleQueueItem reports whether m is a QueueStatus item about a member
// or caller a live event changed since the resync began.
func (e *Engine) staleQueueItem(q *queueState, m ami.Message, waiting bool, key string) bool {
	if !e.resync.active || m.ActionID() == "" {
		return false
	}
	if waiting {
		return q.waitingAt[key] != 0
	}
	return q.memberAt[key] != 0
}

func (e *Engine) dropPending() {
	e.resync.pending, e.resync.npending = nil, 0
}

// listing reports whether list answers are expected: a resync runs or a
// reconcile was begun.
func (e *Engine) listing() bool { return e.resync.active || e.reconMark != 0 }

// staleItem reports whether m is a list item that a live event applied
// since the lists were asked for (stamped at) has made out of date. An
// item of a follow-up's answer is judged against the moment its action
// was handed out: the link applies the answer when it has it all, after
// live events that followed it on the wire.
func (e *Engine) staleItem(m ami.Message, at uint64) bool {
	if e.follow.answering {
		return at > e.follow.mark
	}
	// ActionID last: a live event has none, and looking for it is a
	// walk of all its headers.
	return at > e.resync.mark && e.listing() && m.ActionID() != ""
}

// liveStamp is the stamp for what m sets: the current count for a live
// event, old for a list item or an answer's item (which proves nothing
// newer than the list or the action).
func (e *Engine) liveStamp(m ami.Message, old uint64) uint64 {
	if e.follow.answering || (e.listing() && m.ActionID() != "") {
		return old
	}
	return e.resync.events
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
		e.dropPending()
	}
}

func (e *Engine) beginResync() {
	e.changeLink(LinkResyncing)
	e.resync.active = true
	e.resync.gen++
	e.resetMissing()
	clear(e.follow.sent) // answers of the last connection: no mark, never newer than live
	e.resync.mark = e.resync.events
	for _, c := range e.chans {
		c.confirmed = false
	}
	for _, q := range e.queues {
		q.listed, q.listedMembers, q.listedWaiting = false, nil, nil
		q.memberAt, q.waitingAt = nil, nil
	}
	for _, p := range e.parks {
		p.listed = false
	}
	e.beginConfResync()
}

func (e *Engine) endResync() {
	e.rederiveAll = true // a resync may have rewritten anything
	e.dropPending()
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
				for k := range q.members.m {
					if !q.listedMembers[k] && q.memberAt[k] == 0 {
						q.members.del(k)
						e.dirtyMember[memberKey{q.name, k}] = struct{}{}
						e.dirtyQueue[q.name] = struct{}{}
						repairs++
					}
				}
			}
			for k := range q.waiting.m {
				if (q.listed && !q.listedWaiting[k] && q.waitingAt[k] == 0) || e.byName[k] == nil {
					e.unwait(q, k)
					e.dirtyQueue[q.name] = struct{}{}
					repairs++
				}
			}
			q.listed, q.listedMembers, q.listedWaiting = false, nil, nil
			q.memberAt, q.waitingAt = nil, nil
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
		e.stats.ResyncLoads += uint64(repairs)
		e.lastReconMark = e.chanSeq + 1
		e.pruneBridges()
		e.rebuildXfers()
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
// channel (and corrects its bridge) or adds a missing one. Outside a
// resync or reconcile, the item is taken as current.
func (e *Engine) onCoreShowChannel(m ami.Message) {
	n := uint64(e.applyListedChannel(m, e.listing()))
	if e.resync.active {
		e.stats.ResyncLoads += n
	} else {
		e.stats.DriftRepairs += n
	}
}

// applyListedChannel returns the number of repairs it made. With guard,
// what live events set since the lists were asked for (the channel's
// headers, its bridge) is newer than the item and stays.
func (e *Engine) applyListedChannel(m ami.Message, guard bool) int {
	uid, name := m.Get("Uniqueid"), m.Get("Channel")
	if uid == "" || name == "" || e.tombs.has(uid) {
		return 0 // hung up since the list was taken: never resurrect
	}
	repairs := 0
	c := e.chans[uid]
	created := c == nil
	if created {
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
				before := x.displayName()
				x.pbxName = strings.Clone(c.callerName)
				e.renamed(x, before)
			}
		}
		repairs++
	}
	if created || !guard || c.liveAt <= e.resync.mark {
		if !created {
			e.refreshCommon(c, m)
		}
		e.listedApp(c, m.Get("Application"), m.Get("ApplicationData"))
	}
	e.relinkListedDial(c, m.Get("Application"))
	c.confirmed = true
	c.gen = e.resync.gen
	bid := m.Get("BridgeId")
	switch {
	case guard && c.bridgeAt > e.resync.mark:
		// A live bridge event since the list was asked for knows better.
	case bid == "" && c.bridge != nil:
		e.leaveBridge(c)
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
	if created {
		e.replayPending(uid)
	}
	return repairs
}

// relinkListedDial restores, from a list item, the dial relation a
// DialBegin missed while the link was down would have given: a channel
// ringing from Dial() ("AppDial") carries the Linkedid of the channel
// that called. Without it a call still ringing after a reconnect shows
// with no caller channel (">PJSIP/203-...") until it is answered. A
// relation already known is kept; Local legs are left alone.
func (e *Engine) relinkListedDial(c *channel, app string) {
	link := func(src, dst *channel) {
		if dst.dialledBy != nil || src == dst {
			return
		}
		src.dialTargets = append(src.dialTargets, dst)
		dst.dialledBy = src
		dst.viaTrunk = dst.viaTrunk || src.kind == ownerTrunk || src.viaTrunk
		e.changed(src)
		e.changed(dst)
	}
	if c.local {
		return
	}
	switch app {
	case "AppDial":
		if src := e.chans[c.linkedid]; src != nil && !src.local && !src.originated && src.dialledBy == nil {
			src.dialledOut = true
			link(src, c)
		}
	case "Dial":
		c.dialledOut = true
		for _, x := range e.chans {
			if x.linkedid == c.uid && x.originated && !x.local && x.dialledBy == nil {
				link(c, x)
			}
		}
	}
}

func (e *Engine) beginReconcile() {
	e.reconMark = e.chanSeq + 1
	e.resync.mark = e.resync.events
}

func (e *Engine) reconcile(items []ami.Message) int {
	e.rederiveAll = true
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
		if m.Event() != ami.EventCoreShowChannel {
			continue
		}
		listed[m.Get("Uniqueid")] = true
		repairs += e.applyListedChannel(m, true)
	}
	for _, c := range e.sortedChans() {
		if !listed[c.uid] && c.seq < mark {
			e.dropChannel(c)
			repairs++
		}
	}
	e.stats.DriftRepairs += uint64(repairs)
	e.pruneBridges()
	e.resync.mark = e.resync.events // the next one without BeginReconcile
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
