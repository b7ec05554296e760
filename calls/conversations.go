package calls

// Conversations are not stored: they are derived at Publish from the
// channels, bridges and dial relations, so a transfer, a pickup or a Local
// channel optimisation is reflected by whatever channel graph the events
// leave behind, whatever their order.

// isOut reports whether the channel is the calling side from its owner's
// point of view.
func (c *channel) isOut() bool {
	switch {
	case c.pickup:
		return false
	case c.dialledOut:
		return true
	case c.dialledBy != nil || c.originated:
		return false
	}
	return c.originator
}

func alive(c *channel) bool { return c != nil && !c.gone }

// peerOf finds the party c talks to (or is trying to reach): its bridge
// peer, else the channel it dials, else the one that dialled it; Local
// channel pairs are looked through.
func (e *Engine) peerOf(c *channel) *channel {
	if b := c.bridge; b != nil {
		if b.holding || b.conf {
			return nil // a conference has no single counterpart, even with two in it
		}
		switch len(b.members) {
		case 2:
			other := b.members[0]
			if other == c {
				other = b.members[1]
			}
			return throughLocal(other, c)
		case 1:
			// alone in its bridge (the other party left): fall back to dialling
		default:
			return nil // a conference has no single counterpart
		}
	}
	for _, t := range c.dialTargets {
		if alive(t) {
			return throughLocal(t, c)
		}
	}
	if alive(c.dialledBy) {
		return throughLocal(c.dialledBy, c)
	}
	return nil
}

// follow looks through Local channel pairs: from one half to the party its
// other half is bridged with or dials; p itself when they lead nowhere.
func follow(p, from *channel) *channel {
	if n := throughLocal(p, from); n != nil {
		return n
	}
	return p
}

// throughLocal is follow, but nil when the pair leads to no one any more
// (its other half hung up, or was left alone by the party it was bridged
// with or dialled by): the call through it is over, though its channels
// take a few ms to go.
func throughLocal(p, from *channel) *channel {
	for range 4 {
		if !p.local {
			return p
		}
		if p.partner == nil {
			return p // not known yet
		}
		if p.partner.gone {
			return nil
		}
		q := p.partner
		var n *channel
		if b := q.bridge; b != nil && !b.holding {
			for _, x := range b.members {
				if x != q {
					n = x
					break
				}
			}
		}
		if n == nil {
			for _, t := range q.dialTargets {
				if alive(t) {
					n = t
					break
				}
			}
		}
		if n == nil && alive(q.dialledBy) {
			n = q.dialledBy
		}
		if n == nil && ((q.bridge != nil && !q.bridge.holding) || q.dialledBy != nil) {
			return nil // its party left it
		}
		if n == nil || n == from {
			return p
		}
		p = n
	}
	return p
}

// callerFirst decides the id order "<caller>><callee>" of c and its peer.
func callerFirst(c, p *channel) bool {
	switch {
	case c.dialledBy == p:
		return false
	case p.dialledBy == c:
		return true
	}
	co, po := c.isOut(), p.isOut()
	if co != po {
		return co
	}
	return c.seq <= p.seq
}

func (e *Engine) nameOf(num string) string {
	if num == "" {
		return ""
	}
	if x := e.exts[num]; x != nil {
		if n := x.displayName(); n != "" {
			return n
		}
	}
	if e.cfg.NameLookup != nil {
		return e.cfg.NameLookup(num)
	}
	return ""
}

// phonebookName is the phonebook's name for num as the users of
// extension exten know it (Config.RingLookup, else Config.NameLookup),
// whatever name the PBX gave: extenRinging carries both.
func (e *Engine) phonebookName(exten, num string) string {
	switch {
	case num == "":
		return ""
	case e.cfg.RingLookup != nil:
		return e.cfg.RingLookup(exten, num)
	case e.cfg.NameLookup != nil:
		return e.cfg.NameLookup(num)
	}
	return ""
}

// convFor derives the conversation of one channel for its owner.
// It is the zero Conversation (no ID) when c has nothing left to show: its
// peer was parked away from it.
func (e *Engine) convFor(c *channel) Conversation {
	box := c.get().mailbox
	var p *channel
	if box == "" { // VoiceMail answered it: the mailbox is its only party
		p = e.peerOf(c)
	}
	if p != nil && p.get().parkedIn != "" && p.bridge != nil && p.bridge.holding && c.bridge != p.bridge {
		return Conversation{}
	}
	cv := Conversation{
		Owner:        c.owner,
		LinkedID:     c.linkedid,
		UniqueID:     c.uid,
		StartTime:    c.created,
		AnsweredAt:   c.answeredAt,
		Recording:    recordingOf(c, p),
		InConference: c.conference,
		ThroughQueue: c.queue != "",
		QueueID:      c.queue,
		ThroughTrunk: c.viaTrunk,
	}
	consult := c.consulting()
	more := c.get()
	out := c.isOut() || consult || more.spyee != nil
	if c.kind == ownerTrunk {
		// A trunk's calling side is the outside world: inbound.
		cv.ThroughTrunk = true
		out = !out
	}
	if out {
		cv.Direction = "out"
	} else {
		cv.Direction = "in"
	}
	if p == nil {
		switch {
		case box != "":
			cv.ID = joinID(c.name, "", c.lastID) // no channel of the mailbox's
			c.lastID = cv.ID
		case c.lastID != "" && !c.conference:
			// The peer hung up or the call is parked: keep the id clients know.
			cv.ID = c.lastID
		case c.isOut():
			cv.ID = c.name + ">"
		default:
			cv.ID = ">" + c.name
		}
	} else {
		if consult || callerFirst(c, p) {
			cv.ID = joinID(c.name, p.name, c.lastID)
		} else {
			cv.ID = joinID(p.name, c.name, c.lastID)
		}
		c.lastID = cv.ID
		if p.kind == ownerTrunk && c.kind != ownerTrunk {
			cv.ThroughTrunk = true
		}
	}
	if consult {
		// The consult call's talk time is the target's.
		cv.AnsweredAt = 0
		if p != nil {
			cv.AnsweredAt = p.answeredAt
		}
	}
	cv.Connected = c.conference ||
		(c.answeredAt != 0 && p != nil && p.state == stateUp && (c.bridge == nil || !c.bridge.holding))
	var ex ConvExtra
	x, role := e.xferOf(c, p)
	var leg *channel
	if x != nil {
		ex.Transfer = Transfer{ID: x.id, State: x.state, Role: role, Consult: consult}
		if consult {
			if leg = consultLeg(c); leg != nil {
				ex.Transfer.Leg = leg.name
			}
		}
	}
	ex.Parked, ex.PresentedNum = e.parkedOf(c), presentedNum(c, p, out)
	if more.spyee != nil {
		e.spyConv(&cv, &ex, c)
	}
	// ex is compared whole only when a part may be set: most
	// conversations have none, and the comparison is not cheap.
	if (x != nil || more.spyee != nil || ex.Parked != Parked{} || ex.PresentedNum != "") && ex != (ConvExtra{}) {
		cv.Extra = new(ConvExtra) // only then: ex itself stays on the stack
		*cv.Extra = ex
	}
	if more.spyee != nil {
		return cv
	}
	if more.confRoom != "" {
		cv.CounterpartNum = more.confRoom // the room, not whoever spoke last
		return cv
	}
	if box != "" {
		e.voicemailConv(&cv, c, box)
		return cv
	}
	if consult && e.consultCounterpart(&cv, leg, p) {
		return cv
	}
	if p != nil && c.ringsSeveral() {
		p = nil // a ring group, a queue ringing all, a user's devices: none of them yet
	}
	e.counterpart(&cv, c, p, out)
	return cv
}

// presentedNum is the number c's owner presents on a call out through a
// trunk, when it is not the owner's own: FreePBX's outbound route sets
// the caller's caller ID (macro-outbound-callerid: NewCallerid on the
// caller's channel, the route's or the user's outbound CID) before it
// dials the trunk, so the far end sees that number, not the extension.
func presentedNum(c, p *channel, out bool) string {
	if !out || c.kind != ownerExt || p == nil || p.kind != ownerTrunk {
		return ""
	}
	if known(c.callerNum) && c.callerNum != c.owner {
		return c.callerNum
	}
	return ""
}

// recordingOf is whether c's call is recorded: a MixMonitor records both
// parties, whichever channel runs it. FreePBX starts it from the
// dialplan (sub-record-check) on the caller's channel, or, for a ring
// group's or a queue's member, on the Local half that dials the phone.
func recordingOf(c, p *channel) string {
	if c.recording != "false" {
		return c.recording
	}
	if p != nil && p.recording != "false" {
		return p.recording
	}
	near := c.dialledBy // the Local half between c and p, if any
	if b := c.bridge; b != nil && len(b.members) == 2 {
		near = b.members[0]
		if near == c {
			near = b.members[1]
		}
	}
	if near != nil && near.local {
		if near.recording != "false" {
			return near.recording
		}
		if q := near.partner; q != nil && q.recording != "false" {
			return q.recording
		}
	}
	return c.recording
}

// ringsSeveral reports whether c, in no call yet, dials more than one
// party at once: its counterpart is then what it called (a ring group, a
// queue, a user with several devices), not the first of them.
func (c *channel) ringsSeveral() bool {
	if c.bridge != nil || len(c.dialTargets) < 2 {
		return false
	}
	n := 0
	for _, t := range c.dialTargets {
		if alive(t) {
			n++
		}
	}
	return n > 1
}

// dialled is what c called, as its counterpart before it reaches anyone
// (out: c is the calling side): the queue it waits in (by the number
// dialled to reach it), else the extension it dialled. FreePBX runs its
// dial macros as subroutines at extension "s", which is no number.
func (e *Engine) dialled(c *channel, out bool) string {
	if c.queue != "" {
		if q := e.queues[c.queue]; q != nil && q.number != "" {
			return q.number
		}
		return c.queue
	}
	if out && c.exten != "s" {
		return c.exten
	}
	return ""
}

// joinID is the conversation id "<a>><b>": last itself when it is that id
// (the conversation's id unchanged since the last Publish derived it),
// else a new string.
func joinID(a, b, last string) string {
	if len(last) == len(a)+1+len(b) && last[len(a)] == '>' && last[:len(a)] == a && last[len(a)+1:] == b {
		return last
	}
	return a + ">" + b
}

// counterpart names whom c talks to. An extension peer is named by its
// extension (that stays true across transfers, before any connected line
// update); an outside caller by its caller ID; otherwise what the PBX
// shows as the connected line, else what was dialled. An originated leg
// not yet bridged shows its destination, never its own number.
func (e *Engine) counterpart(cv *Conversation, c, p *channel, out bool) {
	switch {
	case p != nil && p.kind == ownerExt:
		cv.CounterpartNum = p.owner
		if x := e.exts[p.owner]; x != nil {
			cv.CounterpartName = x.displayName()
		}
		if cv.CounterpartName == "" && known(p.callerName) && p.callerNum == p.owner {
			cv.CounterpartName = p.callerName
		}
	case p != nil && p.kind == ownerTrunk && p.isOut() && known(p.callerNum):
		cv.CounterpartNum = p.callerNum
		if known(p.callerName) {
			cv.CounterpartName = p.callerName
		}
	case p == nil && c.ownOriginate():
		// ctibridge's own Originate (click-to-call, pickup, spy): the PBX
		// rings this phone first; AccountCode holds where the call goes,
		// a parking space's parked caller when it goes to the space.
		cv.CounterpartNum = c.get().account
		cv.Direction = "out"
		if ps := e.parks[cv.CounterpartNum]; ps != nil && ps.caller != nil && known(ps.caller.Num) {
			cv.CounterpartNum, cv.CounterpartName = ps.caller.Num, ps.caller.Name
		}
	case known(c.connNum) && (c.connNum != c.owner || c.kind != ownerExt):
		cv.CounterpartNum = c.connNum
		if known(c.connName) {
			cv.CounterpartName = c.connName
		}
	case p != nil && !p.local && known(p.callerNum):
		// (A Local half not seen through yet is no party: its caller ID
		// is the dialplan's, "s" or a DID.)
		cv.CounterpartNum = p.callerNum
		if known(p.callerName) {
			cv.CounterpartName = p.callerName
		}
	default:
		// Nothing names the other party (yet): what c called. An
		// outbound route's trunk leg is such a party: FreePBX dials it
		// from a subroutine, so its caller number is "s".
		cv.CounterpartNum = e.dialled(c, out)
	}
	if cv.CounterpartName == "" {
		cv.CounterpartName = e.nameOf(cv.CounterpartNum)
	}
}
