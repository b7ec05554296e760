package pbxsim

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// talkLocal runs while a is bridged with the Local ;1 of leg w and w's
// ;2 with its phone (a ring group's or a queue's answered member). ended
// are the legs that rang in vain, for a's Cdrs. A hangup on either side
// ends all four channels; a Redirect of a or of the phone moves it on
// and ends the others; hold plays music to the holder's bridge peer;
// Park of a or the phone parks it (local_park.go), Atxfer by either
// transfers (local_xfer.go).
func (c *call) talkLocal(a *channel, w *forkLeg, target string, ended []*forkLeg) (*channel, string) {
	p := c.p
	max := time.NewTimer(p.cfg.MaxCallDuration)
	defer max.Stop()
	mine := func(ch *channel) bool { return ch == a || ch == w.front || ch == w.l2 || ch == w.phone }
	for {
		select {
		case e := <-c.events:
			if !mine(e.ch) {
				if e.kind == evResponse && e.res.IsSuccess() {
					c.byeStale(e.ch)
				}
				if e.reply != nil {
					e.reply <- false
				}
				continue
			}
			switch e.kind {
			case evBye, evHangup, evNoAck, evCancel:
				cause := hangupCause(e.kind)
				if e.kind == evHangup && e.cause != 0 {
					cause = e.cause
				}
				c.hangupLocal(a, w, e.ch, cause, e.kind != evBye, target, ended)
				return nil, ""
			case evRedirect:
				// A blind transfer moves the transferer's bridge peer: the
				// party behind the Local pair.
				switch e.ch {
				case w.front:
					e.ch = w.phone
				case w.l2:
					e.ch = a
				}
				if e.before != nil {
					e.before()
				}
				return c.redirectLocal(a, w, e, target, ended)
			case evHold, evUnhold:
				c.holdLocal(a, w, e.ch, e.kind == evHold)
			case evPark:
				if e.ch == a || e.ch == w.phone {
					return c.parkLocal(a, w, e.ch, target, ended)
				}
			case evAtxfer:
				if e.ch == a || e.ch == w.phone {
					return c.atxferLocal(a, w, e, target, ended)
				}
			case evPickup, evUnpark:
				if e.reply != nil {
					e.reply <- false
				}
			}
		case <-max.C:
			c.hangupLocal(a, w, a, 16, true, target, ended)
			return nil, ""
		case <-c.ctx.Done():
			c.hangupLocal(a, w, a, 16, true, target, ended)
			return nil, ""
		}
	}
}

// holdLocal: x (the caller or the phone) put the call on hold: music on
// hold for its bridge peer (;1 for the caller, ;2 for the phone).
func (c *call) holdLocal(a *channel, w *forkLeg, x *channel, hold bool) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	y := w.front
	if x != a {
		if x != w.phone {
			return
		}
		y = w.l2
	}
	switch {
	case hold && !y.onHold:
		p.emit(chanEvent(ami.EventHold, x, "MusicClass", "default"))
		y.onHold = true
		p.emit(chanEvent(ami.EventMusicOnHoldStart, y, "Class", "default"))
	case !hold && y.onHold:
		p.emit(chanEvent(ami.EventUnhold, x))
		y.onHold = false
		p.emit(chanEvent(ami.EventMusicOnHoldStop, y))
	}
}

// hangupLocal ends the four channels of a call through a Local pair that
// x left. The caller's hangup goes as ringgroup_local and
// queue_local_members show it: the caller (with AgentComplete for a
// queue call), ;1 and its bridge, ;2, the phone and its bridge; the
// phone's hangup goes the other way round.
func (c *call) hangupLocal(a *channel, w *forkLeg, x *channel, cause int, byeX bool, target string, ended []*forkLeg) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	l1, l2, b := w.front, w.l2, w.phone
	for _, ch := range []*channel{a, l1, l2, b} {
		if ch.onHold {
			ch.onHold = false
			p.emit(chanEvent(ami.EventMusicOnHoldStop, ch))
		}
	}
	if byeX {
		c.sendBye(x, true)
	}
	qc := c.q
	reason := "caller"
	if x == a {
		if qc != nil {
			p.emit(chanEvent(ami.EventHangupRequest, a)) // app_queue's hangup carries no Cause
		} else {
			p.hangupRequest(a, cause)
		}
		c.agentComplete(a, reason)
		c.localCallerCdrs(a, w, target, ended)
		br1 := a.bridge
		c.leave(a)
		p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", strconv.Itoa(cause)))
		c.hangupChannel(a, cause, 0)
		c.leave(l1)
		p.emit(bridgeEvent(ami.EventBridgeDestroy, br1, nil))
		p.emit(chanEvent(ami.EventHangupRequest, l2, "Cause", strconv.Itoa(cause)))
		c.hangupChannel(l1, cause, 0)
		p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, p.cfg.Now(), "ANSWERED")
		c.leave(l2)
		p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", strconv.Itoa(cause)))
		c.hangupChannel(l2, cause, 0)
		c.sendBye(b, true)
		c.leave(b)
		p.emit(bridgeEvent(ami.EventBridgeDestroy, w.br, nil))
		c.hangupChannel(b, cause, 0)
		return
	}
	reason = "agent"
	p.hangupRequest(b, cause)
	c.leave(b)
	c.hangupChannel(b, cause, 0)
	c.leave(l2)
	p.emit(bridgeEvent(ami.EventBridgeDestroy, w.br, nil))
	p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, p.cfg.Now(), "ANSWERED")
	p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", strconv.Itoa(cause)))
	c.hangupChannel(l2, cause, 0)
	p.emit(chanEvent(ami.EventHangupRequest, l1, "Cause", strconv.Itoa(cause)))
	br1 := a.bridge
	c.leave(l1)
	c.hangupChannel(l1, cause, 0)
	c.agentComplete(a, reason)
	c.leave(a)
	if br1 != nil {
		p.emit(bridgeEvent(ami.EventBridgeDestroy, br1, nil))
	}
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", strconv.Itoa(cause)))
	c.sendBye(a, true)
	c.localCallerCdrs(a, w, target, ended)
	c.hangupChannel(a, cause, 0)
}

// localCallerCdrs emits the caller's Cdrs: one per leg (Dial, or Queue
// for a queue call), the answered one's with ;1 as destination channel,
// in the order the legs were dialled. p.mu held.
func (c *call) localCallerCdrs(a *channel, w *forkLeg, target string, ended []*forkLeg) {
	p := c.p
	now := p.cfg.Now()
	app, data := "Dial", a.dialData
	start, at := a.created, w.front.answered
	if c.q != nil {
		app, data = "Queue", p.queueData()
		at = a.answered
	}
	all := append([]*forkLeg{w}, ended...)
	for _, l := range sortLegs(all) {
		if l == w {
			p.cdrRecord(a, target, l.front.name, app, data, start, at, now, "ANSWERED")
			continue
		}
		var lat time.Time
		if c.q != nil {
			lat = a.answered
		}
		p.cdrRecord(a, target, l.front.name, app, data, start, lat, l.ended, "NO ANSWER")
	}
}

// sortLegs orders legs by their front channel's creation (its Uniqueid
// sequence).
func sortLegs(legs []*forkLeg) []*forkLeg {
	out := append([]*forkLeg(nil), legs...)
	seq := func(l *forkLeg) int {
		u := l.front.uniqueid
		v, _ := strconv.Atoi(u[strings.LastIndex(u, ".")+1:])
		return v
	}
	slices.SortStableFunc(out, func(x, y *forkLeg) int { return seq(x) - seq(y) })
	return out
}

// redirectLocal: a Redirect of the caller or of the phone. The
// redirected channel goes on in the dialplan; the other three hang up.
func (c *call) redirectLocal(a *channel, w *forkLeg, e callEvent, target string, ended []*forkLeg) (*channel, string) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	x := e.ch
	l1, l2, b := w.front, w.l2, w.phone
	c.agentComplete(a, "transfer")
	if e.other != nil {
		p.emitBlindTransfer(e.other, x, e.context, e.exten)
	}
	now := p.cfg.Now()
	br1 := a.bridge
	c.leave(a)
	c.leave(l1)
	p.emit(bridgeEvent(ami.EventBridgeDestroy, br1, nil))
	c.leave(l2)
	c.leave(b)
	p.emit(bridgeEvent(ami.EventBridgeDestroy, w.br, nil))
	c.hangupChannel(l1, 16, 0)
	p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, now, "ANSWERED")
	c.hangupChannel(l2, 16, 0)
	if x == a {
		a.cdrParts = append(a.cdrParts, cdrPart{destCh: l1.name, data: a.appData, start: cdrStartOf(a), answer: l1.answered, end: now})
		a.cdrStart = now
		c.sendBye(b, true)
		c.hangupChannel(b, 16, 0)
	} else {
		c.localCallerCdrs(a, w, target, ended)
		c.sendBye(a, true)
		c.hangupChannel(a, 16, 0)
		b.dialplan = true
	}
	c.q = nil
	x.context, x.exten, x.priority = e.context, e.exten, 1
	return x, e.exten
}

// throughLocal reports whether ch talks through a Local pair (its bridge
// holds a Local half, or ch is one). p.mu held.
func throughLocal(ch *channel) bool {
	if strings.HasPrefix(ch.name, "Local/") {
		return true
	}
	if ch.bridge == nil {
		return false
	}
	for _, x := range ch.bridge.chans {
		if strings.HasPrefix(x.name, "Local/") {
			return true
		}
	}
	return false
}
