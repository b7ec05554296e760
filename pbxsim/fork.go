package pbxsim

import (
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/emiago/sipgo/sip"
)

// fork is Dial(<dest>&<dest>&...) from a for a call to target: every
// member rings at once, through Local/<m>@from-internal/n (local: a ring
// group, ringgroup_local) or on PJSIP/<m> directly (a user's devices,
// multi_device_user). The first to answer is bridged with a; the others
// are cancelled with cause 26 (answered elsewhere). Every member has a
// contact.
func (c *call) fork(a *channel, target string, members []string, local bool) (*channel, string) {
	p := c.p
	p.mu.Lock()
	timeout := strconv.Itoa(int(p.cfg.RingTimeout / time.Second))
	var legs []*forkLeg
	var dests []string
	if local {
		a.context, a.exten, a.priority = contextMacroDial, "s", 17
		for _, m := range members {
			dests = append(dests, "Local/"+m+"@"+p.cfg.Context+p.localOpts())
		}
		a.app, a.appData = "Dial", strings.Join(dests, "&")+","+timeout+",Ttr"
		for _, m := range members {
			legs = append(legs, c.newLocalLeg(a, m, p.cfg.Context, "s", m+"@"+p.cfg.Context+p.localOpts(), nil))
		}
		for _, l := range legs {
			c.localDial(a, l)
		}
	} else {
		// macro-dial-one: the caller's connected line is the called user
		// (CONNECTEDLINE, Dial option I), then every device is dialled.
		a.context, a.exten, a.priority = contextMacroDialOne, "s", 17
		a.conNum, a.conName = target, p.names[target]
		p.emit(chanEvent(ami.EventNewConnectedLine, a))
		cts := make([]contact, len(members))
		for i, m := range members {
			b, ct := c.newLeg(a, m)
			cts[i] = ct
			b.conNum, b.conName = a.cidNum, a.cidName
			p.setAccountCode(b, a.accountCode)
			p.emit(chanEvent(ami.EventNewConnectedLine, b))
			legs = append(legs, &forkLeg{front: b, phone: b, member: m})
			dests = append(dests, "PJSIP/"+m)
		}
		a.app, a.appData = "Dial", strings.Join(dests, "&")+","+timeout+",TtrI"
		for i, l := range legs {
			p.emit(dialEvent(ami.EventDialBegin, a, l.phone, "DialString", l.member+"/"+cts[i].uri.String()))
			c.invite(l.phone, cts[i], a.cidNum, a.cidName, c.offerOf(a))
		}
	}
	a.dialled, a.dialData = target, a.appData
	p.mu.Unlock()
	return c.forkWait(a, target, legs)
}

// forkWait runs fork's Dial until a leg answers, every leg failed, the
// ring timeout or the caller leaves.
func (c *call) forkWait(a *channel, target string, legs []*forkLeg) (*channel, string) {
	p := c.p
	var ended []*forkLeg
	legOf := func(ch *channel) *forkLeg {
		for _, l := range legs {
			if ch == l.phone || ch == l.front || ch == l.l2 {
				return l
			}
		}
		return nil
	}
	ring := time.NewTimer(p.cfg.RingTimeout)
	defer ring.Stop()
	cause := 19
	for {
		select {
		case e := <-c.events:
			l := legOf(e.ch)
			switch {
			case e.kind == evResponse && l != nil && e.ch == l.phone && e.res.IsProvisional():
				p.mu.Lock()
				c.legRinging(a, l, false)
				p.mu.Unlock()
			case e.kind == evResponse && l != nil && e.ch == l.phone:
				return c.forkAnswered(a, target, l, legs, ended, e.res)
			case e.kind == evResponse && e.res.IsSuccess():
				c.byeStale(e.ch)
			case e.kind == evPickup:
				e.reply <- false // not simulated for a forked Dial
			case e.kind == evFail && l != nil && e.ch == l.phone:
				tech := 0
				cause = 127
				if e.res != nil {
					tech = e.res.StatusCode
					cause = sipToCause(tech)
				}
				p.mu.Lock()
				c.legFailed(a, l, cause, tech)
				p.mu.Unlock()
				legs = removeLeg(legs, l)
				ended = append(ended, l)
				if len(legs) == 0 {
					return c.forkEnd(a, target, nil, ended, cause)
				}
			case (e.kind == evHangup || e.kind == evNoAck) && l != nil:
				p.mu.Lock()
				if l.phone != nil {
					l.phone.cancelCli() // its failure follows
				}
				p.mu.Unlock()
			case (e.kind == evCancel || e.kind == evBye || e.kind == evHangup || e.kind == evNoAck) && e.ch == a:
				c.forkCallerGone(a, target, legs, ended, e.kind)
				return nil, ""
			}
		case <-ring.C:
			return c.forkEnd(a, target, legs, ended, 19)
		case <-c.ctx.Done():
			c.forkCallerGone(a, target, legs, ended, evHangup)
			return nil, ""
		}
	}
}

func removeLeg(legs []*forkLeg, l *forkLeg) []*forkLeg {
	out := legs[:0]
	for _, x := range legs {
		if x != l {
			out = append(out, x)
		}
	}
	return out
}

// forkAnswered: w's phone answered. The other legs are cancelled (cause
// 26) and a is bridged with w's front, in the order of ringgroup_local
// and multi_device_user.
func (c *call) forkAnswered(a *channel, target string, w *forkLeg, legs, ended []*forkLeg, res *sip.Response) (*channel, string) {
	p := c.p
	p.mu.Lock()
	p.stats.Answered++
	c.legAnswered(w, res.Body())
	if w.local() {
		a.conNum, a.conName = w.member, p.names[w.member]
		p.emit(chanEvent(ami.EventNewConnectedLine, a))
	}
	var others []*forkLeg
	for _, o := range legs {
		if o != w {
			others = append(others, o)
		}
	}
	if !w.local() {
		for _, o := range others {
			p.emit(dialEvent(ami.EventDialEnd, a, o.front, "DialStatus", "CANCEL"))
		}
	}
	for _, o := range others {
		status := "CANCEL"
		if !w.local() {
			status = "" // reported above, before the answer
		} else {
			p.emit(dialEvent(ami.EventDialEnd, a, o.front, "DialStatus", status))
		}
		c.dropLeg(a, o, 26, "")
		ended = append(ended, o)
	}
	b := w.front
	b.exten = ""
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", "ANSWER"))
	a.progressed = true
	if a.state == stateUp {
		c.mediaTo(a, w.phone.sdp)
	}
	c.answer(a, w.phone.sdp)
	p.updateDevice(a.endpoint)
	c.legBridged(w)
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
	c.enter(br, b)
	c.enter(br, a)
	if !w.local() {
		// The devices that rang in vain: Cdrs of their own before the
		// answered one's (multi_device_user).
		for _, o := range ended {
			a.cdrParts = append(a.cdrParts, cdrPart{destCh: o.front.name, data: a.appData, start: cdrStartOf(a), end: o.ended, disposition: "NO ANSWER"})
		}
		p.mu.Unlock()
		return c.talk(a, b, target)
	}
	if w.optimize {
		c.optimiseLeg(a, w, br)
		for _, o := range sortLegs(ended) {
			a.cdrParts = append(a.cdrParts, cdrPart{destCh: o.front.name, data: a.appData, start: cdrStartOf(a), end: o.ended, disposition: "NO ANSWER"})
		}
		p.mu.Unlock()
		return c.talk(a, w.phone, target)
	}
	p.mu.Unlock()
	return c.talkLocal(a, w, target, ended)
}

// forkFailed: no leg answered within the ring timeout, or every leg
// failed, and no mailbox takes the call (forkEnd): the rest are
// cancelled and the caller hung up (the dialplan's Hangup()), with a Cdr
// per leg.
func (c *call) forkFailed(a *channel, target string, legs, ended []*forkLeg, cause int) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range legs {
		c.dropLeg(a, l, 16, "NOANSWER")
		ended = append(ended, l)
	}
	a.priority++
	a.app, a.appData = "Hangup", ""
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
	if a.state == stateUp {
		c.sendBye(a, true)
	}
	c.hangupChannel(a, cause, 0)
	disp := "NO ANSWER"
	if cause == 17 {
		disp = "BUSY"
	}
	for _, l := range ended {
		p.cdrRecord(a, target, l.front.name, "Dial", a.dialData, a.created, time.Time{}, l.ended, disp)
	}
}

// forkCallerGone: the caller left while its legs rang.
func (c *call) forkCallerGone(a *channel, target string, legs, ended []*forkLeg, why evKind) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cause, tech, _ := p.callerHangupRequest(a, why)
	for _, l := range legs {
		c.dropLeg(a, l, 16, "CANCEL")
		ended = append(ended, l)
	}
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
	for _, l := range ended {
		p.cdrRecord(a, target, l.front.name, "Dial", a.dialData, a.created, time.Time{}, l.ended, "NO ANSWER")
	}
	if why == evHangup || why == evNoAck {
		c.sendBye(a, true)
	}
	c.hangupChannel(a, cause, tech)
}
