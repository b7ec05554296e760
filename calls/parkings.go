package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

type parkState struct {
	space   string
	timeout int
	caller  *ParkedCaller
	listed  bool   // confirmed by a ParkedCall item during the running resync
	liveAt  uint64 // resyncState.events when a live event last changed it
}

// maxSpaces bounds how many spaces one Parkinglot item may create.
const maxSpaces = 1000

func (e *Engine) ensurePark(space string) *parkState {
	p := e.parks[space]
	if p == nil {
		p = &parkState{space: strings.Clone(space)}
		e.parks[p.space] = p
	}
	e.dirtyPark[p.space] = struct{}{}
	return p
}

// parkerOf turns ParkerDialString "PJSIP/202" into "202".
func parkerOf(s string) string {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, "-@;"); i >= 0 {
		s = s[:i]
	}
	return s
}

func (e *Engine) onParkedCall(m ami.Message) {
	space := m.Get("ParkingSpace")
	if space == "" {
		return
	}
	uid := m.Get("ParkeeUniqueid")
	if e.tombs.has(uid) {
		return // hung up while a list was in flight
	}
	p := e.ensurePark(space)
	if e.staleItem(m, p.liveAt) {
		return // parked, retrieved or given up since the list was taken
	}
	p.liveAt = e.liveStamp(m, p.liveAt)
	if t := m.Get("ParkingTimeout"); t != "" && m.Get("ActionID") == "" {
		p.timeout = atoi(t) // the live event gives the full timeout; list items the rest
	} else if p.timeout == 0 {
		p.timeout = atoi(t)
	}
	pc := &ParkedCaller{
		Channel:  strings.Clone(m.Get("ParkeeChannel")),
		Num:      strings.Clone(m.Get("ParkeeCallerIDNum")),
		Name:     strings.Clone(m.Get("ParkeeCallerIDName")),
		ParkedAt: e.nowMs() - int64(atoi(m.Get("ParkingDuration")))*1000,
		ParkedBy: strings.Clone(parkerOf(m.Get("ParkerDialString"))),
	}
	if !known(pc.Name) {
		pc.Name = e.nameOf(pc.Num)
	}
	// A list gives the duration in whole seconds: within a second of what
	// was known, the time known stands (a live event's is exact).
	if old := p.caller; old != nil && old.Channel == pc.Channel && (old.ParkedAt < pc.ParkedAt || old.ParkedAt-pc.ParkedAt < 1000) {
		pc.ParkedAt = old.ParkedAt
	}
	p.caller = pc
	if e.resync.active {
		p.listed = true
	}
	if c := e.chanBy(uid, pc.Channel); c != nil {
		c.more().parkedIn = p.space
		e.changed(c)
	}
}

// Parked marks the conversation of a party waiting in a parking space.
type Parked struct {
	Parking string // the space, "701"
	By      string // who parked it, "202"
	Timeout int    // seconds before it comes back
}

// parkedOf is what c's conversation says of its parking.
func (e *Engine) parkedOf(c *channel) Parked {
	space := c.get().parkedIn
	if space == "" {
		return Parked{}
	}
	p := e.parks[space]
	if p == nil || p.caller == nil || p.caller.Channel != c.name {
		return Parked{}
	}
	return Parked{Parking: p.space, By: p.caller.ParkedBy, Timeout: p.timeout}
}

// unpark forgets that the channel named name waits in a space.
func (e *Engine) unpark(name string) {
	if c := e.byName[name]; c != nil && c.get().parkedIn != "" {
		c.m.parkedIn = ""
		e.changed(c)
	}
}

func (e *Engine) onUnparked(m ami.Message) {
	space := m.Get("ParkingSpace")
	if space == "" {
		return
	}
	p := e.ensurePark(space)
	p.liveAt = e.liveStamp(m, p.liveAt)
	if p.caller != nil && (p.caller.Channel == m.Get("ParkeeChannel") || m.Get("ParkeeChannel") == "") {
		e.unpark(p.caller.Channel)
		p.caller = nil
		e.touchParkLegs(p.space)
	}
}

// touchParkLegs re-derives the legs of ctibridge's own Originates to a
// parking space (pickup_parking rings the picker's phone first): they
// name the space's parked caller while it waits there (counterpart).
func (e *Engine) touchParkLegs(space string) {
	for _, x := range e.busyExt {
		for _, c := range x.chans {
			if c.m != nil && c.m.account == space && c.ownOriginate() {
				e.changed(c)
			}
		}
	}
}

func (e *Engine) onParkedCallSwap(m ami.Message) {
	space := m.Get("ParkingSpace")
	if space == "" {
		return
	}
	p := e.ensurePark(space)
	p.liveAt = e.liveStamp(m, p.liveAt)
	if p.caller == nil {
		return
	}
	pc := *p.caller
	e.unpark(pc.Channel)
	pc.Channel = strings.Clone(m.Get("ParkeeChannel"))
	if c := e.byName[pc.Channel]; c != nil {
		c.more().parkedIn = p.space
		e.changed(c)
	}
	if n := m.Get("ParkeeCallerIDNum"); known(n) {
		pc.Num = strings.Clone(n)
		pc.Name = strings.Clone(m.Get("ParkeeCallerIDName"))
	}
	p.caller = &pc
}

// onParkinglot (Parkinglots list item) creates the lot's spaces, free.
func (e *Engine) onParkinglot(m ami.Message) {
	start, err1 := parseInt(m.Get("StartSpace"))
	stop, err2 := parseInt(m.Get("StopSpace"))
	if err1 != nil || err2 != nil || stop < start || stop-start >= maxSpaces {
		return
	}
	timeout := atoi(m.Get("Timeout"))
	for s := start; s <= stop; s++ {
		p := e.ensurePark(itoa(s))
		if p.timeout == 0 {
			p.timeout = timeout
		}
	}
}

// parkingLotFollowups lists the configured lots at every resync, so each
// space shows, free, from the first snapshot (res_parking's Parkinglots
// answers one Parkinglot item per lot with its StartSpace, StopSpace and
// Timeout).
func parkingLotFollowups(*Engine) []ami.Message {
	return []ami.Message{ami.NewAction(ami.ActionParkinglots)}
}
