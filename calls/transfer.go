package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Attended transfers as Asterisk's bridging core runs them (the Atxfer
// action, or the *2 feature code): the transferer's one channel leaves the
// bridge it shares with the transferee, who stays there on hold, and enters
// a consult bridge with the target (through a Local channel pair). Until the
// transferer hangs up (completed: AttendedTransfer Result Success) or comes
// back to the held bridge (cancelled: the target hung up or refused), the
// transferer has two conversations on one channel: the held one with the
// transferee and the outgoing consult one with the target.

// Transfer states and roles, as the JSON shows them.
const (
	xferConsulting = "consulting"
	xferCompleted  = "completed"
	xferCancelled  = "cancelled"

	roleTransferer = "transferer"
	roleTransferee = "transferee"
	roleTarget     = "target"
)

// Transfer marks a conversation that takes part in an attended transfer.
type Transfer struct {
	ID    string // stable for the whole transfer
	State string // consulting | completed | cancelled
	Role  string // transferer | transferee | target
	// Consult marks the transferer's consult conversation (not in the
	// JSON: the other one is the held call); actions need to know which.
	Consult bool
	// Leg is, on the consult conversation only (not in the JSON), the
	// channel bridged with the transferer in the consult bridge: the
	// Local half the transfer dials through (the target's own channel
	// once the pair optimised away). Hanging it up ends the consult as
	// the target hanging up would, and Asterisk takes the transferer
	// back to the held call; hanging up the target's channel while it
	// rings would be a no answer to its dialplan (voicemail).
	Leg string
}

// xfer is one attended transfer.
type xfer struct {
	id         string
	n          int // how many transfers its transferer has started
	state      string
	transferer *channel
	held       *bridge  // where the transferee waits
	heldID     string   // the transferer's conversation id with the transferee
	transferee *channel // the first party left in the held bridge
	target     *channel // the party consulted, once known
}

// noteBridgeMove is called when c entered bridge b: leaving a talking
// bridge where others stay for another talking bridge starts a consult
// (unless c just replaces a Local half: swap); the transferer coming back
// to the held bridge cancels it.
func (e *Engine) noteBridgeMove(c *channel, b *bridge, swap bool) {
	prev := c.prevBridge
	c.prevBridge = nil
	if x := c.get().xfer; x != nil && x.transferer == c && x.state == xferConsulting && b == x.held {
		x.state = xferCancelled
		e.touchXfer(x)
		return
	}
	if prev == nil || swap || prev == b || b.holding || b.conf || c.kind != ownerExt || e.bridges[prev.id] != prev {
		return
	}
	var transferee *channel
	for _, m := range prev.members {
		if alive(m) {
			transferee = m
			break
		}
	}
	if transferee == nil {
		return
	}
	x := newXfer(c, prev, transferee)
	c.more().xfer, transferee.more().xfer = x, x
	e.touchXfer(x)
}

// newXfer is the transfer c starts by leaving held, where transferee
// stays.
func newXfer(c *channel, held *bridge, transferee *channel) *xfer {
	heldID := c.lastID
	if heldID == "" { // not published since the call was bridged (a batch, a restart)
		heldID = transferee.name + ">" + c.name
		if callerFirst(c, transferee) {
			heldID = c.name + ">" + transferee.name
		}
	}
	// The transfer's id is the transferer's Uniqueid, with a count after
	// the first when the same channel transfers again (after a cancel).
	n, id := 1, c.uid
	if old := c.get().xfer; old != nil && old.transferer == c {
		n = old.n + 1
		id = c.uid + "/" + itoa(n)
	}
	return &xfer{id: id, n: n, state: xferConsulting, transferer: c, held: held, heldID: heldID, transferee: transferee}
}

// rebuildXfers finds, after a resync, the attended transfers being
// consulted that the engine has no marker for (it restarted, or missed
// the bridge moves while the link was down), from what the lists give:
// a phone's channel bridged with the first half of a Local pair (the
// consult the atxfer feature dials through, Local/<target>@<context>;1)
// while a channel of the same call (its Linkedid) waits alone in another
// talking bridge: the transferee, held.
func (e *Engine) rebuildXfers() {
	var alone map[string][]*channel // by Linkedid: channels alone in a talking bridge
	for _, b := range e.bridges {
		if len(b.members) == 1 && !b.holding && !b.conf {
			if y := b.members[0]; alive(y) && !y.local {
				if alone == nil {
					alone = map[string][]*channel{}
				}
				alone[y.linkedid] = append(alone[y.linkedid], y)
			}
		}
	}
	if alone == nil {
		return
	}
	for _, c := range e.sortedChans() {
		if c.kind != ownerExt || c.local || consultingIn(c) {
			continue
		}
		leg := consultLeg(c)
		if leg == nil || leg.bridge.holding || leg.bridge.conf || !leg.local || !strings.HasSuffix(leg.name, ";1") || localExten(leg.name) == "" {
			continue
		}
		ys := alone[c.linkedid]
		if len(ys) != 1 || consultingIn(ys[0]) || ys[0] == c {
			continue // none, or no telling which one waits for c
		}
		y := ys[0]
		x := newXfer(c, y.bridge, y)
		c.more().xfer, y.more().xfer = x, x
		e.touchXfer(x)
	}
}

// noteBridgeLeave remembers the talking bridge c left while others stay in
// it: entering another one next is how a consult starts.
func (c *channel) noteBridgeLeave(b *bridge) {
	c.prevBridge = nil
	if !b.holding && !b.conf && len(b.members) > 0 {
		c.prevBridge = b
	}
}

func (e *Engine) touchXfer(x *xfer) {
	for _, c := range [...]*channel{x.transferer, x.transferee, x.target} {
		if c != nil {
			e.changed(c)
		}
	}
}

// onAttendedTransfer ends the transfer the event reports, creating it when
// the engine did not see the consult (a phone's own attended transfer,
// which uses two channels and needs no synthesised held conversation).
func (e *Engine) onAttendedTransfer(m ami.Message) {
	tr := e.chanBy(m.Get("OrigTransfererUniqueid"), m.Get("OrigTransfererChannel"))
	te := e.chanBy(m.Get("TransfereeUniqueid"), m.Get("TransfereeChannel"))
	tg := e.chanBy(m.Get("TransferTargetUniqueid"), m.Get("TransferTargetChannel"))
	var x *xfer
	for _, c := range [...]*channel{tr, te} {
		if c != nil && c.get().xfer != nil && c.m.xfer.state == xferConsulting {
			x = c.m.xfer
			break
		}
	}
	if x == nil {
		if tr == nil || te == nil {
			return
		}
		x = &xfer{id: tr.uid, transferer: tr, transferee: te}
		tr.more().xfer, te.more().xfer = x, x
	}
	if tg != nil && x.target == nil {
		if tg.local {
			tg = follow(tg, x.transferer)
		}
		if tg.kind != ownerNone && tg != x.transferer {
			x.target = tg
			tg.more().xfer = x
		}
	}
	if m.Get("Result") == "Success" {
		x.state = xferCompleted
	} else {
		x.state = xferCancelled
	}
	e.touchXfer(x)
}

// xferOf is the transfer c takes part in and c's role in it. A channel
// talking to a consulting transferer is the target (it learns so here, as
// the consult's far end is only known once the Local pair is looked
// through).
func (e *Engine) xferOf(c, peer *channel) (*xfer, string) {
	x := c.get().xfer
	if px := peer.getXfer(); x == nil && px != nil && px.transferer == peer &&
		px.state == xferConsulting && peer.bridge != px.held && c != px.transferee {
		x = px
		x.target, c.more().xfer = c, x
	}
	switch {
	case x == nil:
		return nil, ""
	case x.transferer == c:
		return x, roleTransferer
	case x.transferee == c:
		return x, roleTransferee
	case x.target == c:
		return x, roleTarget
	}
	return nil, ""
}

// consultingIn reports whether c takes part in a transfer still being
// consulted.
func consultingIn(c *channel) bool {
	x := c.getXfer()
	return x != nil && x.state == xferConsulting
}

// getXfer is c's transfer; nil for a nil c.
func (c *channel) getXfer() *xfer {
	if c == nil {
		return nil
	}
	return c.get().xfer
}

// consulting reports whether c is a transferer away from the held bridge.
func (c *channel) consulting() bool {
	x := c.get().xfer
	return x != nil && x.transferer == c && x.state == xferConsulting && c.bridge != x.held
}

// consultLeg is the channel bridged with the consulting transferer c in
// the consult bridge (Transfer.Leg); nil when it is not alone with one.
func consultLeg(c *channel) *channel {
	b := c.bridge
	if b == nil || len(b.members) != 2 {
		return nil
	}
	if l := b.members[0]; l != c {
		return l
	}
	return b.members[1]
}

// consultCounterpart names the target of c's consult while the far end of
// its Local leg is not an extension yet (the Local pair's dialplan has
// not dialled, or dials something else): the number the transfer dialled,
// from the Local channel's name. c's connected line still names the held
// party then.
func (e *Engine) consultCounterpart(cv *Conversation, leg, p *channel) bool {
	if leg == nil || !leg.local || (p != nil && p.kind == ownerExt) {
		return false
	}
	num := localExten(leg.name)
	if num == "" {
		return false
	}
	cv.CounterpartNum, cv.CounterpartName = num, e.nameOf(num)
	return true
}

// localExten is the extension of a Local channel's name
// ("Local/203@from-internal-00000002;1": "203").
func localExten(name string) string {
	rest, ok := strings.CutPrefix(name, "Local/")
	if !ok {
		return ""
	}
	if i := strings.IndexByte(rest, '@'); i > 0 {
		return rest[:i]
	}
	return ""
}

// heldConv is the consulting transferer's conversation with the transferee
// who waits on hold: the call the transferer will come back to.
func (e *Engine) heldConv(c *channel) (Conversation, bool) {
	x := c.m.xfer
	t := x.transferee
	if !alive(t) || t.bridge != x.held {
		return Conversation{}, false
	}
	cv := Conversation{
		ID:         x.heldID,
		Owner:      c.owner,
		LinkedID:   c.linkedid,
		UniqueID:   c.uid,
		StartTime:  c.created,
		AnsweredAt: c.answeredAt,
		Connected:  c.answeredAt != 0 && t.state == stateUp,
		Recording:  c.recording,
		QueueID:    c.queue,
		Extra:      &ConvExtra{Transfer: Transfer{ID: x.id, State: x.state, Role: roleTransferer}},
	}
	cv.ThroughQueue = c.queue != ""
	cv.ThroughTrunk = c.viaTrunk || t.kind == ownerTrunk
	cv.Direction = "in"
	if c.isOut() {
		cv.Direction = "out"
	}
	e.counterpart(&cv, c, t, c.isOut())
	return cv, true
}
