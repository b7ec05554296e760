// The calls: their kinds, how each is placed, answered and hung up.

package synthpbx

import (
	"slices"
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
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
