package synthpbx

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// Kind is what a call is.
type Kind uint8

const (
	Internal  Kind = iota // extension A dials extension B
	TrunkIn               // an outside caller on the trunk dials extension B
	TrunkOut              // extension A dials an outside number through the trunk
	QueueCall             // an outside caller on the trunk into a queue; its free members ring
	Blind                 // Internal, then A is redirected (AMI Redirect) to extension C
	Attended              // Internal, then A consults C (Atxfer, a Local pair) and hangs up: B talks to C
	Forward               // an outside caller on the trunk dials extension Fwd, forwarded (AstDB CF) to outside number FwdTo on the trunk
)

var kindNames = [...]string{"internal", "trunk_in", "trunk_out", "queue", "blind_transfer", "attended_transfer", "forward"}

func (k Kind) String() string { return kindNames[k] }

// Call is one call placed on the PBX. A, B and C are extension indexes,
// -1 where the party is outside (the trunk) or not yet known (a queue
// call's B until a member answers, C until a transfer).
type Call struct {
	Kind    Kind
	A, B, C int
	Outside string // the outside party's number (trunk and queue calls; a forward's caller)
	Fwd     int    // a Forward's extension: dialled, never rung (B and C are -1: both parties are outside)
	FwdTo   string // a Forward's target, the outside number it is forwarded to
	Queue   *Queue
	Tag     int // the owner's, untouched here

	ca, cb   *Chan   // caller, callee (after an attended transfer: transferee, target)
	agents   []*Chan // a queue call's members ringing
	agentIdx []int
	dials    [][2]*Chan // dials not ended: source (nil for none), destination
	live     []*Chan    // channels up, in creation order
	held     []int      // extensions the call holds
	joined   int64      // a queue call's join, Unix seconds
	answered int64      // the agent's answer, Unix seconds
	local    [2]*Chan   // an attended transfer's Local pair
	consult  *Chan      // its target's channel
	bridges  [3]string  // original, consult, target's (attended transfer)
	state    callState
	endedUp  bool // hung up answered
}

type callState uint8

const (
	ringing callState = iota
	up
	consulting // attended: the target rings or talks to A, B on hold
	consulted  // attended: the target answered
	done
)

// Answered says whether the call's current callee answered (of a call
// hung up: whether it was answered when it was).
func (c *Call) Answered() bool {
	return c.state == up || c.state == consulted || c.state == done && c.endedUp
}

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

// Dial starts an internal call from extension a to b: b rings.
func (p *PBX) Dial(a, b int) *Call {
	c := &Call{Kind: Internal, A: a, B: b, C: -1}
	bn := Exten(b)
	p.caller(c, a, bn, "PJSIP/"+bn+",,Tt")
	c.cb = p.extChan(c, b, c.ca.Linked, "s", 0)
	p.ring(c, c.ca, c.cb, bn, b)
	return c
}

// DialIn starts a call from outside number from to extension b on the
// trunk (the shape of calls/testdata/inbound_trunk_did).
func (p *PBX) DialIn(from string, b int) *Call {
	c := &Call{Kind: TrunkIn, A: -1, B: b, C: -1, Outside: from}
	bn := Exten(b)
	p.trunkCaller(c, bn)
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", bn, "Application", "Dial", "AppData", "PJSIP/"+bn+",,Tt")
	c.cb = p.extChan(c, b, c.ca.Linked, "s", 0)
	p.ring(c, c.ca, c.cb, bn, b)
	return c
}

// DialForward starts a call from outside number from to extension b,
// forwarded unconditionally to outside number to (AstDB CF/<b> = to):
// the DID's dialplan on the trunk caller's channel dials to through the
// trunk instead of b, so both legs are PJSIP/trunk-..., b never rings
// and its hint stays idle. The caller's side is
// calls/testdata/inbound_trunk_did's, the forward that of
// call_forward_astdb (the Dial in the caller's own dialplan, no Local
// channel, the callee's leg showing the extension dialled as its Exten),
// the trunk's leg DialOut's.
func (p *PBX) DialForward(from string, b int, to string) *Call {
	c := &Call{Kind: Forward, A: -1, B: -1, C: -1, Outside: from, Fwd: b, FwdTo: to}
	bn := Exten(b)
	p.trunkCaller(c, bn)
	c.held = append(c.held, b) // the owner's to free: no other call uses it meanwhile
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", bn, "Application", "Dial", "AppData", "PJSIP/"+to+"@trunk,15,tT")
	c.cb = p.trunkLeg(c, to)
	p.ring(c, c.ca, c.cb, to+"@trunk", -1)
	return c
}

// trunkLeg creates the trunk's channel of a call dialled out to outside
// number to.
func (p *PBX) trunkLeg(c *Call, to string) *Chan {
	return c.add(p.newChan("trunk", to, "", c.ca.Linked, "from-internal", "s", 0))
}

// DialOut starts a call from extension a to outside number to through
// the trunk: the trunk's leg is PJSIP/trunk-..., showing the number
// dialled as its caller ID (no recording has an outbound trunk call:
// this is the inbound shape the other way round).
func (p *PBX) DialOut(a int, to string) *Call {
	c := &Call{Kind: TrunkOut, A: a, B: -1, C: -1, Outside: to}
	p.caller(c, a, to, "PJSIP/"+to+"@trunk,,Tt")
	c.cb = p.trunkLeg(c, to)
	p.ring(c, c.ca, c.cb, to+"@trunk", -1)
	return c
}

// QueueCall has outside number from call queue q (its DID sent to
// Queue(q) after Answer()); members, free members of q, all ring (the
// shape of calls/testdata/queue_answered: direct PJSIP member channels,
// ringall).
func (p *PBX) QueueCall(from string, q *Queue, members []int) *Call {
	c := &Call{Kind: QueueCall, A: -1, B: -1, C: -1, Outside: from, Queue: q, joined: p.now().Unix()}
	p.trunkCaller(c, q.Number)
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", q.Number, "Application", "Answer", "AppData", "")
	c.ca.State = 6
	p.chanEv(ami.EventNewstate, c.ca)
	c.ca.App = "Queue"
	c.ca.Priority = 3
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", q.Number, "Application", "Queue", "AppData", q.Name+",tT,,,60")
	q.Waiting = append(q.Waiting, c.ca)
	p.pairEv(ami.EventQueueCallerJoin, "agent,all", nil, "", c.ca, "Queue", q.Name, "Position", strconv.Itoa(len(q.Waiting)), "Count", strconv.Itoa(len(q.Waiting)))
	p.chanEv(ami.EventMusicOnHoldStart, c.ca, "Class", "default")
	for _, m := range members {
		x := Exten(m)
		ch := p.extChan(c, m, c.ca.Linked, "s", 0)
		ch.App = "AppQueue"
		p.chanEv(ami.EventNewchannel, ch)
		ch.Exten = q.Number
		p.pairEv(ami.EventAgentCalled, "agent,all", c.ca, "Dest", ch, "Queue", q.Name, "Interface", "PJSIP/"+x, "MemberName", "User "+x)
		p.dialEv(ami.EventDialBegin, c.ca, ch, "DialString", x)
		c.dials = append(c.dials, [2]*Chan{c.ca, ch})
		c.agents, c.agentIdx = append(c.agents, ch), append(c.agentIdx, m)
	}
	for i, ch := range c.agents {
		ch.State, ch.Conn, ch.ConnName = 5, c.ca.Num, c.ca.CIDName
		p.chanEv(ami.EventNewstate, ch)
		p.chanEv(ami.EventNewConnectedLine, ch)
		p.dialEv(ami.EventDialState, c.ca, ch, "DialStatus", "RINGING")
		p.setAgent(q, c.agentIdx[i], 8)
	}
	return c
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

// Answer has the ringing party answer: for a queue call the first member
// ringing (the others are cancelled, Answered elsewhere), for an
// attended transfer the target, else the callee. Both sides end up
// bridged.
func (p *PBX) Answer(c *Call) {
	switch {
	case c.state == consulting:
		p.answerConsult(c)
		return
	case c.state != ringing:
		return
	case c.Kind == QueueCall:
		p.answerQueue(c)
		return
	}
	c.cb.State = 6
	p.chanEv(ami.EventNewstate, c.cb)
	if c.B >= 0 {
		p.setStatus(c.B, 1)
	}
	p.dialEv(ami.EventDialEnd, c.ca, c.cb, "DialStatus", "ANSWER")
	c.endDial(c.cb)
	if c.ca.State != 6 {
		c.ca.State = 6
		p.chanEv(ami.EventNewstate, c.ca)
	}
	c.bridges[0] = p.bridge(c.cb, c.ca)
	c.state = up
}

func (p *PBX) answerQueue(c *Call) {
	q := c.Queue
	win, m := c.agents[0], c.agentIdx[0]
	win.State = 6
	p.chanEv(ami.EventNewstate, win)
	for _, ch := range c.agents {
		st := "CANCEL"
		if ch == win {
			st = "ANSWER"
		}
		p.dialEv(ami.EventDialEnd, c.ca, ch, "DialStatus", st)
		c.endDial(ch)
	}
	c.ca.Conn, c.ca.ConnName = win.Num, win.CIDName
	p.chanEv(ami.EventNewConnectedLine, c.ca)
	p.chanEv(ami.EventMusicOnHoldStop, c.ca)
	p.setStatus(m, 1)
	for i, ch := range c.agents[1:] {
		o := c.agentIdx[i+1]
		p.setStatus(o, 0)
		p.hangup(ch, "26", "Answered elsewhere")
		c.drop(ch)
		c.release(o)
	}
	for _, o := range c.agentIdx {
		p.memberStatus(q, o, ami.EventQueueMemberStatus, true)
	}
	p.leaveQueue(c)
	now := p.now().Unix()
	hold := int(now - c.joined)
	if q.Completed+q.Abandoned == 0 {
		q.HoldTime = hold
	} else {
		q.HoldTime = (q.HoldTime*3 + hold) / 4
	}
	x := Exten(m)
	p.pairEv(ami.EventAgentConnect, "agent,all", c.ca, "Dest", win, "Queue", q.Name, "Interface", "PJSIP/"+x,
		"MemberName", "User "+x, "HoldTime", strconv.Itoa(hold), "RingTime", strconv.Itoa(hold))
	c.answered = now
	c.cb, c.B = win, m
	c.agents, c.agentIdx = nil, nil
	c.bridges[0] = p.bridge(win, c.ca)
	c.state = up
}

// leaveQueue takes a queue call's caller out of its queue's waiting list.
func (p *PBX) leaveQueue(c *Call) {
	q := c.Queue
	pos := slices.Index(q.Waiting, c.ca)
	if pos < 0 {
		return
	}
	q.Waiting = slices.Delete(q.Waiting, pos, pos+1)
	p.pairEv(ami.EventQueueCallerLeave, "agent,all", nil, "", c.ca, "Queue", q.Name, "Position", strconv.Itoa(pos+1), "Count", strconv.Itoa(len(q.Waiting)))
}

// Redirect blind-transfers an answered internal call's caller to
// extension to with AMI Redirect (the shape of
// calls/testdata/blind_transfer_redirect): the bridge breaks, B is hung
// up, A's channel runs the dialplan again and dials to, who rings.
func (p *PBX) Redirect(c *Call, to int) {
	if c.state != up || c.A < 0 || c.B < 0 {
		return
	}
	tn := Exten(to)
	c.ca.Exten = tn
	br := c.ca.Bridge
	p.leave(c.ca, 1)
	p.leave(c.cb, 0)
	p.destroy(br)
	p.hangup(c.cb, "16", "Normal Clearing")
	c.drop(c.cb)
	p.setStatus(c.B, 0)
	c.release(c.B)
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", tn, "Application", "Dial", "AppData", "PJSIP/"+tn+",,Tt")
	c.B, c.C = to, to
	c.cb = p.extChan(c, to, c.ca.Linked, "s", 0)
	p.ring(c, c.ca, c.cb, tn, to)
	c.state = ringing
}

// Transfer starts an attended transfer of an answered internal call by
// its caller to extension to (Atxfer, the shape of
// calls/testdata/atxfer_complete): B is held in the call's bridge, A
// moves to a consult bridge with a Local pair whose ;2 dials to.
func (p *PBX) Transfer(c *Call, to int) {
	if c.state != up || c.A < 0 || c.B < 0 {
		return
	}
	a, b := c.ca, c.cb
	tn := Exten(to)
	c.C = to
	p.chanEv(ami.EventHold, a)
	p.chanEv(ami.EventMusicOnHoldStart, b, "Class", "default")
	p.setStatus(c.B, 16)
	p.seq++
	lname := fmt.Sprintf("Local/%s@from-internal-%08x;", tn, p.seq)
	l1 := c.add(p.named(lname+"1", "", "", a.Linked, "from-internal", tn, 0))
	l2 := c.add(p.named(lname+"2", "", "", a.Linked, "from-internal", tn, 4))
	c.local = [2]*Chan{l1, l2}
	p.chanEv(ami.EventNewchannel, l1)
	p.chanEv(ami.EventNewchannel, l2)
	c.bridges[1] = p.newBridge()
	l2.Num, l2.CIDName = a.Num, a.CIDName
	p.chanEv(ami.EventNewCallerid, l2, "CID-CallingPres", cidPres)
	p.localEv(ami.EventLocalBridge, c, nil, "Context", "from-internal", "Exten", tn, "LocalOptimization", "Yes")
	l1.Conn, l1.ConnName = a.Num, a.CIDName
	p.chanEv(ami.EventNewConnectedLine, l1)
	p.enter(l1, c.bridges[1], 1)
	p.leave(a, 1)
	p.enter(a, c.bridges[1], 2)
	cc := p.extChan(c, to, a.Linked, "s", 0)
	c.consult = cc
	cc.App = "AppDial"
	p.chanEv(ami.EventNewchannel, cc)
	cc.Conn, cc.ConnName, cc.Exten = a.Num, a.CIDName, tn
	p.chanEv(ami.EventNewConnectedLine, cc)
	p.dialEv(ami.EventDialBegin, l2, cc, "DialString", tn)
	c.dials = append(c.dials, [2]*Chan{l2, cc}, [2]*Chan{nil, l1})
	l2.Conn, l2.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, l2)
	a.Conn, a.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, a)
	cc.State = 5
	p.chanEv(ami.EventNewstate, cc)
	l1.State = 5
	p.chanEv(ami.EventNewstate, l1)
	p.setStatus(to, 8)
	p.dialEv(ami.EventDialState, l2, cc, "DialStatus", "RINGING")
	p.dialEv(ami.EventDialState, nil, l1, "DialStatus", "RINGING")
	c.state = consulting
}

// localEv emits an event about the call's Local pair (LocalOne*,
// LocalTwo*), with src as Source* when not nil.
func (p *PBX) localEv(name string, c *Call, src *Chan, kv ...string) {
	hs := amievent.AppendChannel(amievent.Head(name, "call,all", 48+len(kv)/2), "LocalOne", &c.local[0].Channel)
	hs = amievent.AppendChannel(hs, "LocalTwo", &c.local[1].Channel)
	if src != nil {
		hs = amievent.AppendChannel(hs, "Source", &src.Channel)
	}
	p.send(ami.NewMessage(amievent.AppendPairs(hs, kv...)...))
}

func (p *PBX) answerConsult(c *Call) {
	l1, l2, cc := c.local[0], c.local[1], c.consult
	cc.State = 6
	p.chanEv(ami.EventNewstate, cc)
	p.dialEv(ami.EventDialEnd, l2, cc, "DialStatus", "ANSWER")
	l2.State = 6
	p.chanEv(ami.EventNewstate, l2)
	c.bridges[2] = p.newBridge()
	l1.State = 6
	p.chanEv(ami.EventNewstate, l1)
	p.dialEv(ami.EventDialEnd, nil, l1, "DialStatus", "ANSWER")
	c.dials = nil
	p.enter(cc, c.bridges[2], 1)
	p.setStatus(c.C, 1)
	p.enter(l2, c.bridges[2], 2)
	c.state = consulted
}

// Complete ends an attended transfer whose target answered: the
// transferer hangs up, the consult bridge merges into the original one,
// and the Local pair optimises itself away, leaving B talking to C.
func (p *PBX) Complete(c *Call) {
	if c.state != consulted {
		return
	}
	a, b, l1, l2, cc := c.ca, c.cb, c.local[0], c.local[1], c.consult
	orig, second := c.bridges[0], c.bridges[1]
	p.chanEv(ami.EventHangupRequest, a, "Cause", "16")
	p.leave(a, 1)
	merge := amievent.AppendBridge(amievent.Head(ami.EventBridgeMerge, "call,all", 16), "To", basic(orig, 1))
	p.send(ami.NewMessage(amievent.AppendBridge(merge, "From", basic(second, 1))...))
	p.leave(l1, 0)
	p.enter(l1, orig, 2)
	p.setStatus(c.B, 1)
	p.chanEv(ami.EventMusicOnHoldStop, b)
	hs := amievent.Head(ami.EventAttendedTransfer, "call,all", 100)
	hs = append(hs, ami.Header{Key: "Result", Value: "Success"})
	hs = amievent.AppendBridge(amievent.AppendChannel(hs, "OrigTransferer", &a.Channel), "Orig", basic(orig, 2))
	hs = amievent.AppendBridge(amievent.AppendChannel(hs, "SecondTransferer", &a.Channel), "Second", basic(second, 0))
	hs = amievent.AppendChannel(amievent.AppendChannel(hs, "Transferee", &b.Channel), "TransferTarget", &l1.Channel)
	p.send(ami.NewMessage(amievent.AppendPairs(hs, "IsExternal", "No", "DestType", "Bridge", "DestBridgeUniqueid", orig)...))
	b.Conn, b.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, b)
	p.chanEv(ami.EventSoftHangupRequest, a, "Cause", "16")
	l1.Conn, l1.ConnName = b.Num, b.CIDName
	p.chanEv(ami.EventNewConnectedLine, l1)
	p.destroy(second)
	p.setStatus(c.A, 0)
	p.hangup(a, "16", "Normal Clearing")
	c.drop(a)
	c.release(c.A)
	cc.Conn, cc.ConnName = b.Num, b.CIDName
	p.chanEv(ami.EventNewConnectedLine, cc)
	p.localEv(ami.EventLocalOptimizationBegin, c, cc, "DestUniqueId", l2.UID, "Id", "0")
	p.leave(cc, 1)
	p.leave(l1, 1)
	p.enter(cc, orig, 2)
	l2.Num, l2.CIDName = b.Num, b.CIDName
	p.chanEv(ami.EventNewCallerid, l2, "CID-CallingPres", cidPres)
	p.localEv(ami.EventLocalOptimizationEnd, c, nil, "Success", "No", "Id", "0")
	p.chanEv(ami.EventHangupRequest, l2, "Cause", "16")
	p.hangup(l1, "16", "Normal Clearing")
	p.leave(l2, 0)
	p.destroy(c.bridges[2])
	p.chanEv(ami.EventSoftHangupRequest, l2, "Cause", "16")
	p.hangup(l2, "16", "Normal Clearing")
	c.drop(l1)
	c.drop(l2)
	c.ca, c.cb, c.A, c.B = b, cc, c.B, c.C
	c.local, c.consult = [2]*Chan{}, nil
	c.state = up
}

// Hangup ends the call in whatever state it is: a queue caller still
// waiting abandons, an answered queue call completes, dials not ended
// are cancelled, every bridge is left and destroyed, every channel hung
// up (the callee's first) and every extension the call held left idle.
func (p *PBX) Hangup(c *Call) {
	if c.state == done {
		return
	}
	q := c.Queue
	if q != nil && c.state == ringing {
		pos := slices.Index(q.Waiting, c.ca)
		wait := strconv.FormatInt(p.now().Unix()-c.joined, 10)
		p.pairEv(ami.EventQueueCallerAbandon, "agent,all", nil, "", c.ca, "Queue", q.Name, "Position", strconv.Itoa(pos+1),
			"OriginalPosition", strconv.Itoa(pos+1), "HoldTime", wait)
		q.Abandoned++
	}
	if q != nil && c.state == up {
		x := Exten(c.B)
		talk := p.now().Unix() - c.answered
		p.chanEv(ami.EventHangupRequest, c.ca, "Cause", "16")
		p.pairEv(ami.EventAgentComplete, "agent,all", c.ca, "Dest", c.cb, "Queue", q.Name, "Interface", "PJSIP/"+x,
			"MemberName", "User "+x, "HoldTime", strconv.FormatInt(c.answered-c.joined, 10), "TalkTime", strconv.FormatInt(talk, 10), "Reason", "caller")
		if q.Completed++; q.Completed == 1 {
			q.TalkTime = int(talk)
		} else {
			q.TalkTime = (q.TalkTime*3 + int(talk)) / 4
		}
		q.taken[c.B]++
		q.lastCall[c.B] = p.now().Unix()
	}
	for _, d := range c.dials {
		p.dialEv(ami.EventDialEnd, d[0], d[1], "DialStatus", "CANCEL")
	}
	c.dials = nil
	if q != nil {
		p.leaveQueue(c)
	}
	var seen []string
	for _, ch := range c.live {
		br := ch.Bridge
		if br == "" || slices.Contains(seen, br) {
			continue
		}
		seen = append(seen, br)
		var in []*Chan
		for _, x := range c.live {
			if x.Bridge == br {
				in = append(in, x)
			}
		}
		for i, x := range in {
			p.leave(x, len(in)-1-i)
		}
		p.destroy(br)
	}
	for i := len(c.live) - 1; i >= 0; i-- {
		p.hangup(c.live[i], "16", "Normal Clearing")
	}
	c.live = nil
	c.endedUp = c.Answered()
	for _, i := range c.held {
		if mq := p.queueOf(i); mq != nil {
			p.setAgent(mq, i, 0)
		} else {
			p.setStatus(i, 0)
		}
	}
	c.state = done
}

// Held are the extensions the call holds (ringing or talking, or a
// forward's extension), for its owner to free when it ends.
func (c *Call) Held() []int { return c.held }
