package pbxsim

import (
	"context"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Timing of the simulated carrier behind the freepbx plan's trunk.
const (
	carrierRing   = 100 * time.Millisecond // until it rings (180)
	carrierAnswer = 2 * time.Second        // until it answers
)

// dialOut is the freepbx plan's outbound route for a's call to number:
// macro-outbound-callerid gives the caller the route's caller ID
// (<DIDPrefix><exten>), then macro-dialout-trunk dials the number on the
// trunk from its "s" extension, so the trunk leg's caller number is "s"
// and so is the caller's connected line once the far end answers. The
// carrier is pbxsim itself: it rings, answers after carrierAnswer and
// stays until a side hangs up.
func (c *call) dialOut(a *channel, number string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	a.context, a.exten, a.priority = contextOutboundCIDFn, "s", 1
	if e := p.exts[a.cidNum]; e != nil && a.endpoint != p.cfg.Trunk {
		a.cidNum = p.cfg.DIDPrefix + a.cidNum
		p.emit(chanEvent(ami.EventNewCallerid, a, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
	}
	c.recordCheck(a, "out", number)
	a.context, a.priority = contextMacroDialout, 20
	a.app, a.appData = "Dial", "PJSIP/"+number+"@"+p.cfg.Trunk+",300,T"
	a.dialled, a.dialData = number, a.appData
	b := p.newChannel(c, p.cfg.Trunk)
	b.dialler = a
	b.linkedid = a.linkedid
	b.cidNum, b.cidName = "s", ""
	b.conNum, b.conName = a.cidNum, a.cidName
	b.context, b.exten = contextFromPSTN, "s"
	b.app, b.appData = "AppDial", "(Outgoing Line)"
	b.cancelCli = func() {}
	p.emit(chanEvent(ami.EventNewchannel, b))
	p.setAccountCode(b, a.accountCode)
	p.emit(dialEvent(ami.EventDialBegin, a, b, "DialString", number+"@"+p.cfg.Trunk))
	p.mu.Unlock()

	ring := time.NewTimer(carrierRing)
	defer ring.Stop()
	answer := time.NewTimer(carrierAnswer)
	defer answer.Stop()
	for {
		select {
		case e := <-c.events:
			switch {
			case (e.kind == evCancel || e.kind == evBye || e.kind == evHangup || e.kind == evNoAck) && e.ch == a:
				c.callerGone(a, b, number, e.kind)
				return nil, ""
			case e.kind == evHangup && e.ch == b:
				c.dialFailed(a, b, number, 16, 0)
				return nil, ""
			case e.kind == evPickup:
				e.reply <- false
			}
		case <-ring.C:
			p.mu.Lock()
			b.state = stateRinging
			p.emit(chanEvent(ami.EventNewstate, b))
			p.emit(dialEvent(ami.EventDialState, a, b, "DialStatus", "RINGING"))
			a.progressed = true
			if a.srv != nil && a.state != stateUp {
				srv := a.srv
				c.srvDo(a, func(context.Context) { srv.Respond(180, "Ringing", nil) })
			}
			p.mu.Unlock()
		case <-answer.C:
			p.mu.Lock()
			p.stats.Answered++
			b.state = stateUp
			b.answered = p.cfg.Now()
			p.emit(chanEvent(ami.EventNewstate, b))
			a.conNum, a.conName = b.cidNum, b.cidName
			p.emit(chanEvent(ami.EventNewConnectedLine, a))
			b.exten = ""
			p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", "ANSWER"))
			body := p.sdp(p.chanSeq, false)
			if a.state == stateUp {
				c.mediaTo(a, body)
			}
			c.answer(a, body)
			br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
			p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
			c.enter(br, b)
			c.enter(br, a)
			p.mu.Unlock()
			return c.talk(a, b, number)
		case <-c.ctx.Done():
			c.callerGone(a, b, number, evHangup)
			return nil, ""
		}
	}
}
