// The plumbing of a call: its channels created, dialled and rung as
// the recordings' are, and its bridges entered, left and destroyed.

package synthpbx

import (
	"fmt"
	"slices"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

func (c *Call) add(ch *Chan) *Chan {
	c.live = append(c.live, ch)
	return ch
}

func (c *Call) drop(ch *Chan) {
	c.live = slices.DeleteFunc(c.live, func(x *Chan) bool { return x == ch })
}

func (c *Call) endDial(dst *Chan) {
	c.dials = slices.DeleteFunc(c.dials, func(d [2]*Chan) bool { return d[1] == dst })
}

func (c *Call) release(i int) {
	c.held = slices.DeleteFunc(c.held, func(x int) bool { return x == i })
}

func (p *PBX) extChan(c *Call, i int, linked, exten string, state int) *Chan {
	x := Exten(i)
	c.held = append(c.held, i)
	return c.add(p.newChan(x, x, "User "+x, linked, "from-internal", exten, state))
}

// caller starts extension a's channel dialling exten.
func (p *PBX) caller(c *Call, a int, exten, dialArg string) {
	c.ca = p.extChan(c, a, "", exten, 4)
	c.ca.App = "Dial"
	p.chanEv(ami.EventNewchannel, c.ca)
	p.dialplanEv(ami.EventVarSet, c.ca, "Variable", "SIPCALLID", "Value", c.ca.UID+"@synth")
	c.ca.Priority = 2 // after the recordings' NoOp
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", exten, "Application", "Dial", "AppData", dialArg)
}

// trunkCaller starts an outside caller's channel on the trunk for the
// DID exten, sent on to from-internal as from-trunk does: the Goto at
// priority 2 (after a NoOp), from-internal's next step at 2 (after its
// NoOp), as inbound_trunk_did's.
func (p *PBX) trunkCaller(c *Call, exten string) {
	c.ca = c.add(p.newChan("trunk", c.Outside, "Caller "+c.Outside, "", "from-trunk", exten, 4))
	p.chanEv(ami.EventNewchannel, c.ca)
	c.ca.Priority = 2
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", exten, "Application", "Goto", "AppData", "from-internal,"+exten+",1")
	c.ca.Context = "from-internal"
}

// ring has src dial dst (created Down): dst rings and says so, as the
// recordings' PJSIP legs do.
func (p *PBX) ring(c *Call, src, dst *Chan, dialString string, ext int) {
	dst.App = "AppDial"
	p.chanEv(ami.EventNewchannel, dst)
	dst.Conn, dst.ConnName, dst.Exten = src.Num, src.CIDName, src.Exten
	p.chanEv(ami.EventNewConnectedLine, dst)
	p.dialEv(ami.EventDialBegin, src, dst, "DialString", dialString)
	c.dials = append(c.dials, [2]*Chan{src, dst})
	src.Conn, src.ConnName = dst.Num, dst.CIDName
	p.chanEv(ami.EventNewConnectedLine, src)
	dst.State = 5
	p.chanEv(ami.EventNewstate, dst)
	if ext >= 0 {
		p.setStatus(ext, 8)
	}
	if c.A >= 0 && src == c.ca {
		p.setStatus(c.A, 1)
	}
	p.dialEv(ami.EventDialState, src, dst, "DialStatus", "RINGING")
}

// trunkLeg creates the trunk's channel of a call dialled out to outside
// number to.
func (p *PBX) trunkLeg(c *Call, to string) *Chan {
	return c.add(p.newChan("trunk", to, "", c.ca.Linked, "from-internal", "s", 0))
}

// bridge puts chans into a new basic bridge, in order.
func (p *PBX) bridge(chans ...*Chan) string {
	id := p.newBridge()
	for i, ch := range chans {
		p.enter(ch, id, i+1)
	}
	return id
}

// newBridge creates an empty basic bridge and says so.
func (p *PBX) newBridge() string {
	p.seq++
	id := fmt.Sprintf("synth-bridge-%d.%d", p.epoch, p.seq)
	p.bridgeEv(ami.EventBridgeCreate, id, 0, nil)
	return id
}

// basic is the snapshot of basic bridge id holding n channels.
func basic(id string, n int) *amievent.Bridge {
	return &amievent.Bridge{ID: id, Type: "basic", Tech: "simple_bridge", Channels: n}
}

// bridgeEv emits a bridge event of bridge id holding n channels, about
// ch when not nil.
func (p *PBX) bridgeEv(name, id string, n int, ch *Chan) {
	var cs *amievent.Channel
	if ch != nil {
		cs = &ch.Channel
	}
	p.send(amievent.BridgeEvent(name, basic(id, n), cs))
}

func (p *PBX) enter(ch *Chan, id string, n int) {
	ch.Bridge = id
	p.bridgeEv(ami.EventBridgeEnter, id, n, ch)
}

func (p *PBX) leave(ch *Chan, n int) {
	id := ch.Bridge
	ch.Bridge = ""
	p.bridgeEv(ami.EventBridgeLeave, id, n, ch)
}

func (p *PBX) destroy(id string) {
	p.bridgeEv(ami.EventBridgeDestroy, id, 0, nil)
}
