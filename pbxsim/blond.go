package pbxsim

import "github.com/ctibridge/ctibridge/ami"

// A blonde transfer, as Asterisk 22's bridge_basic.c runs it: the
// transferer hangs up while the target still rings (its "Calling Target"
// state). Asterisk takes the held bridge off hold, merges the consult
// bridge into it (so the transferee is bridged with the ringing Local
// half ;1) and reports the transfer done (AttendedTransfer Success), as
// for a completed one; the transferer's channel hangs up. When the target
// answers, the Local pair optimises away and the transferee talks with
// it. If the target never answers, Asterisk (atxferdropcall=no) calls
// the transferer back; pbxsim does not: the transferee is hung up, as
// Asterisk does when its callbacks fail.

// blondMerge: t hung up while the target rings. p.mu not held.
func (c *call) blondMerge(x *consult, bye bool) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	x.blond = true
	c.mergeAtxfer(x, bye)
}

// blondAnswered: the target answered a blonde transfer (consultAnswered
// bridged it with ;2): the pair optimises away, the transferee and the
// target talk.
func (c *call) blondAnswered(x *consult) (*channel, string) {
	p := c.p
	p.mu.Lock()
	c.optimiseAtxfer(x)
	p.mu.Unlock()
	return c.resume(x.y, x.d, x.y.exten)
}

// blondEnd sorts an event while a blonde transfer waits for its target:
// the channel whose end fails it (the target's refusal, a Local half or
// the transferee hung up), nil for an event that changes nothing.
func blondEnd(x *consult, e callEvent) *channel {
	end := e.kind == evFail || e.kind == evBye || e.kind == evNoAck || e.kind == evHangup
	switch {
	case !end:
	case e.ch == x.d, e.ch == x.y:
		return e.ch
	case (e.ch == x.l1 || e.ch == x.l2) && e.kind == evHangup:
		return e.ch
	}
	return nil
}

// blondFailed ends a blonde transfer whose target did not answer (or
// whose transferee left, ch == x.y): the consultation's channels go and
// the transferee is hung up.
func (c *call) blondFailed(x *consult, ch *channel) (*channel, string) {
	c.consultDrop(x)
	defer c.blondGone() // after the unlock: the rest of a Local pair's call
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	y := x.y
	if y.gone {
		return nil, ""
	}
	if ch == y {
		p.hangupRequest(y, 16)
	}
	c.sendBye(y, true)
	c.leave(y)
	p.emit(bridgeEvent(ami.EventBridgeDestroy, x.br1, nil))
	if y.dialplan {
		p.emit(chanEvent(ami.EventSoftHangupRequest, y, "Cause", "16")) // its dialplan ends
	}
	c.hangupChannel(y, 16, 0)
	return nil, ""
}
