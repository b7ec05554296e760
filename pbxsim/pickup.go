package pbxsim

import (
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// Directed pickup of a ringing call: dialling **<exten> (FreePBX's
// Pickup(<exten>@from-internal)) or an Originate to Application PickupChan
// (Data: the ringing channel, or its PJSIP/<exten> prefix). The picker's
// channel takes the place of the ringing one in the caller's Dial, in the
// order of the pickup_ringing recording: the ringing channel is cancelled
// (cause 26, answered elsewhere) and the caller is bridged with the picker.

// ringingTarget finds the ringing dialled channel to pick up: by exten
// (Pickup) or by channel name or prefix (PickupChan). p.mu held.
func (p *PBX) ringingTarget(exten, chanName string) *channel {
	for _, b := range p.channels {
		if b.gone || b.state != stateRinging || b.dialler == nil {
			continue
		}
		if exten != "" && b.endpoint == exten {
			return b
		}
		if chanName != "" && (b.name == chanName || strings.HasPrefix(b.name, chanName+"-")) {
			return b
		}
	}
	return nil
}

// pickup runs Pickup/PickupChan for d. The caller's call takes d over;
// this goroutine (d's INVITE handler or Originate) waits until that call
// ends, as a retrieved parked call does.
func (c *call) pickup(d *channel, exten, chanName string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	b := p.ringingTarget(exten, chanName)
	if b == nil {
		// Nothing to pick up: the dialplan goes on to Hangup().
		if d.state == stateUp {
			c.sendBye(d, true)
		}
		c.hangupChannel(d, 16, 0)
		p.mu.Unlock()
		return nil, ""
	}
	a := b.dialler
	if chanName != "" {
		d.app, d.appData = "PickupChan", chanName
	} else {
		d.app, d.appData = "Pickup", exten+"@"+p.cfg.Context
	}
	if d.state != stateUp {
		d.conNum, d.conName = a.cidNum, a.cidName
		p.emit(chanEvent(ami.EventNewConnectedLine, d))
		d.progressed = true
		c.answer(d, a.sdp)
	}
	reply := make(chan bool, 1)
	b.call.post(callEvent{kind: evPickup, ch: b, other: d, to: c, reply: reply})
	p.mu.Unlock()
	ok := false
	select {
	case ok = <-reply:
	case <-time.After(2 * time.Second):
	}
	if !ok {
		p.mu.Lock()
		c.sendBye(d, true)
		c.hangupChannel(d, 16, 0)
		p.mu.Unlock()
		return nil, ""
	}
	<-b.call.done
	return nil, ""
}

// pickupEvent is Pickup: picker d took ringing b.
func pickupEvent(d, b *channel) ami.Message {
	hs := amievent.Head(ami.EventPickup, "call,all", 40)
	hs = chanHeaders(hs, "", d)
	hs = chanHeaders(hs, "Target", b)
	return ami.NewMessage(hs...)
}

// pickedUp is the dialling call's side of a pickup of its ringing callee b
// by d (event e): d joins this call, b is cancelled, a is answered and
// bridged with d.
func (c *call) pickedUp(a, b *channel, target string, e callEvent) (*channel, string) {
	p := c.p
	d := e.other
	p.mu.Lock()
	if d.gone || b.gone {
		p.mu.Unlock()
		e.reply <- false
		return nil, "" // not reached: the caller goes on (see dial)
	}
	d.call = c
	e.reply <- true
	p.emit(pickupEvent(d, b))
	a.conNum, a.conName = d.cidNum, d.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, a))
	p.emit(chanEvent(ami.EventSoftHangupRequest, b, "Cause", "16"))
	b.cancelCli()
	d.exten = ""
	p.emit(dialEvent(ami.EventDialEnd, a, d, "DialStatus", "ANSWER"))
	d.exten = "**" + b.endpoint
	a.progressed = true
	c.answer(a, d.sdp)
	p.updateDevice(a.endpoint)
	b.exten = d.exten
	c.hangupChannel(b, 26, 0)
	p.cdrRecord(b, b.exten, "", "AppDial", "(Outgoing Line)", b.created, time.Time{}, p.cfg.Now(), "NO ANSWER")
	// The caller's Cdr splits at the pickup: its Dial to b (answered, 0 s)
	// and the call with d.
	now := p.cfg.Now()
	a.cdrParts = append(a.cdrParts, cdrPart{destCh: b.name, data: a.appData, start: a.created, answer: now, end: now})
	a.cdrStart = now
	p.stats.Answered++
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
	c.enter(br, d)
	c.enter(br, a)
	p.mu.Unlock()
	return c.talk(a, d, target)
}
