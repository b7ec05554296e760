package pbxsim

import (
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// The parking lot of the recordings: "default", extension 700, spaces
// 701-720.
const (
	parkFirst = 701
	parkLast  = 720
	parkLot   = "default"
)

func parkDevice(space int) string { return "park:" + strconv.Itoa(space) + "@parkedcalls" }

// parkedEvent builds ParkedCall, ParkedCallGiveUp, ParkedCallTimeOut and
// UnParkedCall (with retriever) events. p.mu held.
func (p *PBX) parkedEvent(name string, x *channel, retriever *channel) ami.Message {
	hs := amievent.Head(name, "call,all", 40)
	hs = chanHeaders(hs, "Parkee", x)
	if retriever != nil {
		hs = chanHeaders(hs, "Retriever", retriever)
	}
	left := p.cfg.ParkingTimeout - p.cfg.Now().Sub(x.parkedAt)
	hs = append(hs,
		ami.Header{Key: "ParkerDialString", Value: x.parker},
		ami.Header{Key: "Parkinglot", Value: parkLot},
		ami.Header{Key: "ParkingSpace", Value: strconv.Itoa(x.parkSpace)},
		ami.Header{Key: "ParkingTimeout", Value: strconv.Itoa(max(0, int(left/time.Second)))},
		ami.Header{Key: "ParkingDuration", Value: strconv.Itoa(int(p.cfg.Now().Sub(x.parkedAt) / time.Second))})
	return ami.NewMessage(hs...)
}

// park puts x into the first free parking space; y, its bridge peer (may
// be nil), is hung up. x then waits there for a retriever, its own hangup
// or the parking timeout (which, unlike Asterisk's call-back to the
// parker, simply hangs it up).
func (c *call) park(x, y *channel) (*channel, string) {
	parker := ""
	if y != nil {
		parker = "PJSIP/" + y.endpoint
	}
	return c.parkThen(x, y, parker, nil)
}

// parkThen is park with the parker's dial string (ParkerDialString) and
// then, run with p.mu held once y hung up (or both, the lot full): what
// else ends with y (a Local pair's other half and the party behind it).
func (c *call) parkThen(x, y *channel, parker string, then func()) (*channel, string) {
	p := c.p
	p.mu.Lock()
	space := 0
	for s := parkFirst; s <= parkLast; s++ {
		if p.parked[s] == nil {
			space = s
			break
		}
	}
	if space == 0 {
		c.lotFull(x, y)
		if then != nil {
			then()
		}
		p.mu.Unlock()
		return nil, ""
	}
	pb := &bridge{id: newBridgeID(), typ: "parking", tech: "holding_bridge", creator: "Parking", name: parkLot}
	p.emit(bridgeEvent(ami.EventBridgeCreate, pb, nil))
	old := x.bridge
	c.leave(x)
	x.parkSpace, x.parkedAt = space, p.cfg.Now()
	x.parker = parker
	if x.dialplan && y != nil {
		x.splitCdr(y, x.appData, x.parkedAt) // the call with y ends here (park_retrieve)
	}
	x.app, x.appData = "Park", ""
	p.parked[space] = x
	p.emit(p.parkedEvent(ami.EventParkedCall, x, nil))
	p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
		ami.Header{Key: "Device", Value: parkDevice(space)}, ami.Header{Key: "State", Value: "INUSE"})...))
	c.enter(pb, x)
	p.emit(chanEvent(ami.EventMusicOnHoldStart, x, "Class", "default"))
	if y != nil {
		c.leave(y)
		if old != nil {
			p.emit(bridgeEvent(ami.EventBridgeDestroy, old, nil))
		}
		c.sendBye(y, true)
		c.hangupChannel(y, 16, 0)
	}
	if then != nil {
		then()
	}
	p.mu.Unlock()

	timeout := time.NewTimer(p.cfg.ParkingTimeout)
	defer timeout.Stop()
	unparkEnd := func(name string, bye bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.emit(p.parkedEvent(name, x, nil))
		delete(p.parked, space)
		p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
			ami.Header{Key: "Device", Value: parkDevice(space)}, ami.Header{Key: "State", Value: "NOT_INUSE"})...))
		p.emit(chanEvent(ami.EventMusicOnHoldStop, x))
		br := x.bridge
		c.leave(x)
		if br != nil {
			p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
		}
		if bye {
			c.sendBye(x, true)
		}
		c.hangupChannel(x, 16, 0)
	}
	for {
		select {
		case e := <-c.events:
			if e.ch != x {
				continue
			}
			switch e.kind {
			case evBye, evNoAck, evCancel:
				unparkEnd(ami.EventParkedCallGiveUp, false)
				return nil, ""
			case evHangup:
				unparkEnd(ami.EventParkedCallGiveUp, true)
				return nil, ""
			case evUnpark:
				p.mu.Lock()
				x.call = e.to
				delete(p.parked, space)
				p.mu.Unlock()
				e.reply <- true
				// The retrieving call owns x now; this goroutine (x's
				// INVITE handler) stays until that call ends.
				<-e.to.done
				return nil, ""
			}
		case <-timeout.C:
			unparkEnd(ami.EventParkedCallTimeOut, true)
			return nil, ""
		case <-c.ctx.Done():
			unparkEnd(ami.EventParkedCallGiveUp, true)
			return nil, ""
		}
	}
}

// retrieve connects r, who dialled a parking space, with the call parked
// there.
func (c *call) retrieve(r *channel, space int) (*channel, string) {
	p := c.p
	p.mu.Lock()
	x := p.parked[space]
	var reply chan bool
	if x != nil {
		reply = make(chan bool, 1)
		x.call.post(callEvent{kind: evUnpark, ch: x, to: c, reply: reply})
	}
	p.mu.Unlock()
	ok := false
	if reply != nil {
		select {
		case ok = <-reply:
		case <-time.After(2 * time.Second):
		}
	}
	if !ok {
		p.mu.Lock()
		c.hangupChannel(r, 1, 0)
		p.mu.Unlock()
		return nil, ""
	}
	p.mu.Lock()
	if r.context == "from-trunk" {
		r.context = p.cfg.Context
	}
	r.app, r.appData = "ParkedCall", strconv.Itoa(space)
	r.progressed = true
	c.answer(r, x.sdp)
	c.mediaTo(x, r.sdp) // the parked call was talking to the parker
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
	p.emit(p.parkedEvent(ami.EventUnParkedCall, x, r))
	p.emit(chanEvent(ami.EventMusicOnHoldStop, x))
	p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
		ami.Header{Key: "Device", Value: parkDevice(space)}, ami.Header{Key: "State", Value: "NOT_INUSE"})...))
	// Asterisk keeps the lot's holding bridge alive; so does pbxsim (no
	// BridgeDestroy for it here).
	c.leave(x)
	c.enter(br, x)
	c.enter(br, r)
	x.conNum, x.conName = r.cidNum, r.cidName
	r.conNum, r.conName = x.cidNum, x.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, x))
	p.emit(chanEvent(ami.EventNewConnectedLine, r))
	x.parkSpace = 0
	if x.dialplan {
		// The parked time is a Cdr of its own; x owns the Cdr of its call
		// with the retriever.
		now := p.cfg.Now()
		x.cdrParts = append(x.cdrParts, cdrPart{app: "Park", data: parkLot + ":" + strconv.Itoa(space), start: cdrStartOf(x), answer: cdrStartOf(x), end: now})
		x.cdrStart = now
		x.partyA = true
	}
	p.stats.Answered++
	p.mu.Unlock()
	return c.talk(r, x, strconv.Itoa(space))
}

// lotFull: no free space. Asterisk refuses the Park; pbxsim hangs both up.
// p.mu held.
func (c *call) lotFull(x, y *channel) {
	c.sendBye(x, true)
	if y != nil {
		c.sendBye(y, true)
		c.leave(y)
		c.hangupChannel(y, 16, 0)
	}
	c.leave(x)
	c.hangupChannel(x, 16, 0)
}
