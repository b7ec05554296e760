package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// forkLeg is one destination of a Dial that rings several at once (a
// ring group's members, a user's devices) or of a queue's member: the
// phone's channel and, for a Local destination, the Local pair between
// the caller and it, as core_local.c makes it for Local/<m>@<ctx>/n: ;1
// is what the caller dialled and is bridged with the caller, ;2 runs
// the member's dialplan and dials the phone. "/n": the pair is never
// optimised away, so an answered call has four channels in two bridges
// until it ends (ringgroup_local, queue_local_members).
type forkLeg struct {
	front  *channel // what the caller dialled: the Local ;1, or the phone
	l2     *channel // the Local ;2; nil when the phone is dialled directly
	phone  *channel // nil until ;2 dials it
	member string   // the extension rung
	br     *bridge  // the phone's bridge with ;2, once answered
	ended  time.Time
	// optimize: dialled without /n, the pair optimises itself away once
	// both its halves are bridged (core_unreal's default).
	optimize bool
}

// local reports whether the leg goes through a Local pair.
func (l *forkLeg) local() bool { return l.l2 != nil }

// newLocalLeg creates Local/<member>@<ctx>-n;1/;2 dialled by a, with the
// events core_local.c reports: both Newchannels, ;1's caller ID (frontCID:
// "s" for a ring group, the number the caller dialled for a queue), ;2
// taking the caller's, LocalBridge, then before's events (AgentCalled
// for a queue; before may be nil) and DialBegin a -> ;1 with dialString
// (ending "/n": the pair is never optimised away). p.mu held.
func (c *call) newLocalLeg(a *channel, member, ctx, frontCID, dialString string, before func(l1 *channel)) *forkLeg {
	p := c.p
	l1, l2 := p.newLocalPair(c, member, ctx)
	l1.linkedid, l2.linkedid = a.linkedid, a.linkedid
	l1.app, l1.appData = "AppDial", "(Outgoing Line)"
	l2.state = stateRing
	l2.dialplan = true
	p.emit(chanEvent(ami.EventNewchannel, l1), chanEvent(ami.EventNewchannel, l2))
	l1.cidNum = frontCID
	pres := []string{"CID-CallingPres", "0 (Presentation Allowed, Not Screened)"}
	if ctx != contextFromQueue {
		l1.exten = "s"
		l1.conNum, l1.conName = a.cidNum, a.cidName
		p.emit(chanEvent(ami.EventNewCallerid, l1, pres...), chanEvent(ami.EventNewConnectedLine, l1))
	} else {
		p.emit(chanEvent(ami.EventNewCallerid, l1, pres...))
	}
	l2.cidNum, l2.cidName = a.cidNum, a.cidName
	l2.conNum = l1.cidNum
	p.emit(chanEvent(ami.EventNewCallerid, l2, pres...), chanEvent(ami.EventNewConnectedLine, l2))
	optimize := !strings.HasSuffix(dialString, "/n")
	p.emit(localEvent(ami.EventLocalBridge, l1, l2, "Context", ctx, "Exten", member, "LocalOptimization", yesNo(optimize)))
	if before != nil {
		before(l1)
	}
	p.emit(dialEvent(ami.EventDialBegin, a, l1, "DialString", dialString))
	return &forkLeg{front: l1, l2: l2, member: member, optimize: optimize}
}

// optimiseLeg: the answered leg w was dialled without /n, so once the
// caller a is bridged with ;1 (bridge br) and the phone with ;2, the pair
// optimises itself out as core_unreal does: LocalOptimizationBegin (the
// caller, which runs a dialplan, is the source and swaps into the phone's
// bridge in ;2's place), LocalOptimizationEnd, the pair hangs up and
// a's bridge with ;1 is destroyed. The call goes on as a plain two-party
// bridge (transfers and parking work on it). p.mu held.
func (c *call) optimiseLeg(a *channel, w *forkLeg, br *bridge) {
	p := c.p
	l1, l2, b := w.front, w.l2, w.phone
	p.emit(localEvent(ami.EventLocalOptimizationBegin, l1, l2, append(chanKV("Source", a), "DestUniqueId", l2.uniqueid, "Id", "0")...))
	c.leave(a)
	c.leave(l2)
	c.enterSwap(w.br, a, l2)
	p.emit(localEvent(ami.EventLocalOptimizationEnd, l1, l2, "Success", "Yes", "Id", "0"))
	c.leave(l1)
	p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
	p.hangupRequest(l2, 16)
	c.hangupChannel(l1, 16, 0)
	now := p.cfg.Now()
	p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, now, "ANSWERED")
	p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", "16"))
	c.hangupChannel(l2, 16, 0)
	a.conNum, a.conName = b.cidNum, b.cidName
	b.conNum, b.conName = a.cidNum, a.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, b))
}

// localDial is the member's dialplan on ;2 (macro-dial-one): Dial of
// the member's phone with the caller's media offer. p.mu held; the
// member has a contact.
func (c *call) localDial(a *channel, l *forkLeg) {
	p := c.p
	l2 := l.l2
	l2.context, l2.exten, l2.priority = contextMacroDialOne, "s", 17
	l2.app = "Dial"
	l2.appData = "PJSIP/" + l.member + "," + strconv.Itoa(int(p.cfg.RingTimeout/time.Second)) + ",trIb"
	l2.dialled, l2.dialData = l.member, l2.appData
	l2.conNum, l2.conName = l.member, p.names[l.member]
	p.emit(chanEvent(ami.EventNewConnectedLine, l2))
	b, ct := c.newLeg(l2, l.member)
	l.phone = b
	b.conNum, b.conName = a.cidNum, a.cidName
	p.setAccountCode(b, a.accountCode)
	p.emit(chanEvent(ami.EventNewConnectedLine, b))
	p.emit(dialEvent(ami.EventDialBegin, l2, b, "DialString", l.member+"/"+ct.uri.String()))
	l2.sdp = c.offerOf(a) // ;2 carries the caller's media (a pickup answers with it)
	c.invite(b, ct, a.cidNum, a.cidName, l2.sdp)
}

// offerOf is the media offer for a leg a dials: a's own (the phones talk
// directly), or pbxsim's when a has none. p.mu held.
func (c *call) offerOf(a *channel) []byte {
	if len(a.sdp) > 0 {
		return a.sdp
	}
	return c.p.sdp(c.p.chanSeq, false)
}

// legRinging: l's phone rings (180). For a Local leg ;1 rings too and
// takes the member's caller ID (a queue's ;1 keeps the dialled number
// and takes the caller as connected line). p.mu held.
func (c *call) legRinging(a *channel, l *forkLeg, queue bool) {
	p := c.p
	b := l.phone
	if b.state == stateRinging || b.state == stateUp {
		return
	}
	if l.local() {
		l1 := l.front
		l1.state = stateRinging
		p.emit(chanEvent(ami.EventNewstate, l1))
		if queue {
			l1.conNum, l1.conName = a.cidNum, a.cidName
			p.emit(chanEvent(ami.EventNewConnectedLine, l1))
		} else {
			l1.cidNum, l1.cidName = l.member, p.names[l.member]
			p.emit(chanEvent(ami.EventNewCallerid, l1, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
		}
		p.emit(dialEvent(ami.EventDialState, a, l1, "DialStatus", "RINGING"))
		p.emit(dialEvent(ami.EventDialState, l.l2, b, "DialStatus", "RINGING"))
	}
	b.state = stateRinging
	p.emit(chanEvent(ami.EventNewstate, b))
	if queue {
		p.setAccountCode(b, a.accountCode)
	}
	if !l.local() {
		p.emit(dialEvent(ami.EventDialState, a, b, "DialStatus", "RINGING"))
	}
	p.updateDevice(b.endpoint)
	if a.state != stateUp {
		a.progressed = true
		p.updateDevice(a.endpoint)
		if a.srv != nil {
			srv := a.srv
			c.srvDo(a, func(context.Context) { srv.Respond(180, "Ringing", nil) })
		}
	}
}

// legAnswered: l's phone answered with answer. A Local leg's ;2 is
// bridged with the phone and both halves go up; the caller's side is
// left to the caller (DialEnd, its bridge with ;1). p.mu held.
func (c *call) legAnswered(l *forkLeg, answer []byte) {
	p := c.p
	b := l.phone
	now := p.cfg.Now()
	b.state = stateUp
	b.answered = now
	b.sdp = answer
	p.emit(chanEvent(ami.EventNewstate, b))
	p.updateDevice(b.endpoint)
	if !l.local() {
		return
	}
	l2, l1 := l.l2, l.front
	p.emit(dialEvent(ami.EventDialEnd, l2, b, "DialStatus", "ANSWER"))
	l2.state, l2.answered, l2.sdp = stateUp, now, answer
	p.emit(chanEvent(ami.EventNewstate, l2))
	l.br = &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, l.br, nil))
	l1.state, l1.answered, l1.sdp = stateUp, now, answer
	p.emit(chanEvent(ami.EventNewstate, l1))
}

// legBridged puts an answered Local leg's phone and ;2 in their bridge.
// p.mu held.
func (c *call) legBridged(l *forkLeg) {
	if l.local() {
		l.phone.exten = ""
		c.enter(l.br, l.phone)
		c.enter(l.br, l.l2)
	}
}

// dropLeg ends an unanswered leg with cause (26 when another answered,
// 16 when the caller left): the phone is cancelled; a Local leg's pair
// ends in the order of ringgroup_local (;2's hangup request, ;1, ;2's
// Dial and Cdr, ;2). status is the caller's DialEnd for it ("" none).
// p.mu held.
func (c *call) dropLeg(a *channel, l *forkLeg, cause int, status string) {
	p := c.p
	now := p.cfg.Now()
	l.ended = now
	if status != "" {
		p.emit(dialEvent(ami.EventDialEnd, a, l.front, "DialStatus", status))
	}
	b := l.phone
	if !l.local() {
		if b != nil && !b.gone {
			b.cancelCli()
			c.hangupChannel(b, cause, 0)
		}
		return
	}
	l1, l2 := l.front, l.l2
	if !l2.gone {
		p.emit(chanEvent(ami.EventHangupRequest, l2, "Cause", strconv.Itoa(cause)))
	}
	c.hangupChannel(l1, cause, 0)
	if !l2.gone {
		if b != nil && !b.gone {
			p.emit(dialEvent(ami.EventDialEnd, l2, b, "DialStatus", "CANCEL"))
		}
		if b != nil {
			p.cdrRecord(l2, l.member, b.name, "Dial", l2.dialData, l2.created, time.Time{}, now, "NO ANSWER")
		}
		p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", "16"))
		c.hangupChannel(l2, cause, 0)
	}
	if b != nil && !b.gone {
		b.cancelCli()
		c.hangupChannel(b, cause, 0)
	}
}

// legFailed: l's phone refused the call (busy, unavailable...) or gave
// no answer: its Dial ends, then (a Local leg) ;2's dialplan and the
// pair. p.mu held.
func (c *call) legFailed(a *channel, l *forkLeg, cause, tech int) {
	p := c.p
	b := l.phone
	status := dialStatus(cause)
	if !l.local() {
		p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", status))
		c.hangupChannel(b, cause, tech)
		l.ended = p.cfg.Now()
		return
	}
	l2 := l.l2
	p.emit(dialEvent(ami.EventDialEnd, l2, b, "DialStatus", status))
	c.hangupChannel(b, cause, tech)
	now := p.cfg.Now()
	p.cdrRecord(l2, l.member, b.name, "Dial", l2.dialData, l2.created, time.Time{}, now, "NO ANSWER")
	p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", "16"))
	c.hangupChannel(l2, cause, 0)
	c.hangupChannel(l.front, cause, 0)
	p.emit(dialEvent(ami.EventDialEnd, a, l.front, "DialStatus", status))
	l.ended = now
}
