package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// queueState is app_queue's queue (Config.Queue), guarded by PBX.mu.
type queueState struct {
	members   []*queueMember
	byNum     map[string]*queueMember
	waiting   []*queueEntry // in queue order: Position is index+1
	completed int
	abandoned int
	holdTime  int // app_queue's running averages, seconds
	talkTime  int
	rrNext    int // rrmemory: the member to try first
}

type queueMember struct {
	num        string
	callsTaken int
	lastCall   int64 // unix seconds, 0 if never
	inCall     bool
	ringing    *call // the caller ringing it now (ringinuse=no)
	paused     bool  // QueuePause: not rung until unpaused
	reason     string
}

type queueEntry struct {
	ch     *channel
	joined time.Time
	orig   int // position at join
}

// qleg is one member channel rung for a queue caller.
type qleg struct {
	b     *channel
	m     *queueMember
	rang  time.Time
	ended time.Time
}

// queueConn is a queue caller connected to a member (see call.talk).
type queueConn struct {
	b                 *channel
	m                 *queueMember
	joined, connected time.Time
	cancelled         []*qleg // the legs that rang in vain, for their Cdrs
	completed         bool    // AgentComplete sent
}

func newQueueState(members []string) *queueState {
	q := &queueState{byNum: map[string]*queueMember{}}
	for _, m := range members {
		qm := &queueMember{num: m}
		q.members = append(q.members, qm)
		q.byNum[m] = qm
	}
	return q
}

func (q *queueState) position(ch *channel) int {
	for i, e := range q.waiting {
		if e.ch == ch {
			return i + 1
		}
	}
	return 0
}

func (q *queueState) remove(ch *channel) {
	for i, e := range q.waiting {
		if e.ch == ch {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return
		}
	}
}

// queueData is Queue()'s argument string, the channel's appData and the
// CDR's LastData.
func (p *PBX) queueData() string {
	return p.cfg.Queue + ",tT,,," + strconv.Itoa(int(p.cfg.QueueTimeout/time.Second))
}

// queueMemberEvent is QueueMemberStatus for m. p.mu held.
func (p *PBX) queueMemberEvent(m *queueMember) ami.Message {
	return p.memberEvent("QueueMemberStatus", m)
}

// memberEvent is QueueMemberStatus or QueueMemberPause for m. p.mu held.
func (p *PBX) memberEvent(event string, m *queueMember) ami.Message {
	name, status := m.num, "5"
	if e := p.exts[m.num]; e != nil {
		name, status = e.name, queueMemberStatus(e.dev)
	}
	iface := "PJSIP/" + m.num
	return ami.NewMessage(append(ev(event, "agent,all", 18),
		ami.Header{Key: "Queue", Value: p.cfg.Queue}, ami.Header{Key: "MemberName", Value: name},
		ami.Header{Key: "Interface", Value: iface}, ami.Header{Key: "StateInterface", Value: iface},
		ami.Header{Key: "Membership", Value: "static"}, ami.Header{Key: "Penalty", Value: "0"},
		ami.Header{Key: "CallsTaken", Value: strconv.Itoa(m.callsTaken)},
		ami.Header{Key: "LastCall", Value: strconv.FormatInt(m.lastCall, 10)},
		ami.Header{Key: "LastPause", Value: "0"},
		ami.Header{Key: "LoginTime", Value: strconv.FormatInt(p.started.Unix(), 10)},
		ami.Header{Key: "InCall", Value: boolNum(m.inCall)}, ami.Header{Key: "Status", Value: status},
		ami.Header{Key: "Paused", Value: boolNum(m.paused)}, ami.Header{Key: "PausedReason", Value: m.reason},
		ami.Header{Key: "Ringinuse", Value: "0"}, ami.Header{Key: "Wrapuptime", Value: "0"})...)
}

func boolNum(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (p *PBX) queueDevice(state string) {
	p.emit(ami.NewMessage(append(ev("DeviceStateChange", "call,all", 4),
		ami.Header{Key: "Device", Value: "Queue:" + p.cfg.Queue}, ami.Header{Key: "State", Value: state})...))
}

// agentEvent is AgentCalled, AgentConnect, AgentComplete... p.mu held.
func (p *PBX) agentEvent(name string, a, b *channel, kv ...string) ami.Message {
	iface := "PJSIP/" + b.endpoint
	return dialEvent(name, a, b, append([]string{"Queue", p.cfg.Queue, "Interface", iface, "MemberName", p.names[b.endpoint]}, kv...)...)
}

// freeMembers returns the members that may ring now, in the order of the
// strategy: registered, idle (ringinuse=no) and not rung for another
// caller. rrmemory returns at most one. p.mu held.
func (p *PBX) freeMembers() []*queueMember {
	q := p.queue
	n := len(q.members)
	var out []*queueMember
	for i := range n {
		m := q.members[i]
		if p.cfg.QueueStrategy == "rrmemory" {
			m = q.members[(q.rrNext+i)%n]
		}
		e := p.exts[m.num]
		if m.ringing != nil || m.paused || e == nil || e.contact == nil || e.dev != devNotInUse {
			continue
		}
		out = append(out, m)
		if p.cfg.QueueStrategy == "rrmemory" {
			q.rrNext = (q.rrNext + i + 1) % n
			break
		}
	}
	return out
}

// queueCall is Answer() then Queue(support,tT,,,60) for channel a.
func (c *call) queueCall(a *channel, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	q := p.queue
	if a.context == "from-trunk" {
		a.context = p.cfg.Context // Goto(from-internal,${EXTEN},1)
	}
	a.priority = 2
	a.progressed = true
	c.answer(a, p.sdp(p.chanSeq, false))
	p.stats.Answered++
	a.priority = 3
	a.app, a.appData = "Queue", p.queueData()
	ent := &queueEntry{ch: a, joined: p.cfg.Now()}
	q.waiting = append(q.waiting, ent)
	ent.orig = len(q.waiting)
	if len(q.waiting) == 1 {
		p.queueDevice("RINGING")
	}
	p.emit(chanEvent("QueueCallerJoin", a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(ent.orig), "Count", strconv.Itoa(len(q.waiting))))
	p.emit(chanEvent("MusicOnHoldStart", a, "Class", "default"))
	p.mu.Unlock()

	var legs, ended []*qleg
	legOf := func(ch *channel) *qleg {
		for _, l := range legs {
			if l.b == ch {
				return l
			}
		}
		return nil
	}
	dropLeg := func(l *qleg) {
		for i, x := range legs {
			if x == l {
				legs = append(legs[:i], legs[i+1:]...)
				break
			}
		}
		l.ended = p.cfg.Now()
		l.m.ringing = nil
		ended = append(ended, l)
	}
	// ring rings the free members (p.mu held).
	ring := func() {
		for _, m := range p.freeMembers() {
			legs = append(legs, c.ringMember(a, m, target))
		}
	}
	// cancelLegs ends every ringing leg, as when the caller leaves (p.mu held).
	cancelLegs := func(cause int) {
		for _, l := range append([]*qleg(nil), legs...) {
			l.b.cancelCli()
			c.hangupChannel(l.b, cause, 0)
			dropLeg(l)
		}
	}
	cdrs := func(answered *qleg) {
		now := p.cfg.Now()
		if answered != nil {
			p.cdrAt(a, target, answered.b.name, "Queue", a.appData, a.answered, now, "ANSWERED")
		}
		for _, l := range ended {
			p.cdrAt(a, target, l.b.name, "Queue", a.appData, a.answered, l.ended, "NO ANSWER")
		}
		if answered == nil && len(ended) == 0 {
			p.cdrAt(a, target, "", "Queue", a.appData, a.answered, now, "ANSWERED")
		}
	}
	leave := func() {
		pos := q.position(a)
		q.remove(a)
		if len(q.waiting) == 0 {
			p.queueDevice("NOT_INUSE")
		}
		p.emit(chanEvent("QueueCallerLeave", a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(pos), "Count", strconv.Itoa(len(q.waiting))))
	}

	p.mu.Lock()
	ring()
	p.mu.Unlock()
	wait := time.NewTimer(p.cfg.QueueTimeout)
	defer wait.Stop()
	ringT := time.NewTimer(p.cfg.QueueRingTime)
	defer ringT.Stop()
	retry := time.NewTimer(p.cfg.QueueRetry)
	defer retry.Stop()
	for {
		select {
		case e := <-c.events:
			l := legOf(e.ch)
			switch {
			case e.kind == evResponse && l != nil && e.res.IsProvisional():
				p.mu.Lock()
				b := l.b
				if b.state != stateRinging && b.state != stateUp {
					b.state = stateRinging
					p.emit(chanEvent("Newstate", b))
					p.emit(chanEvent("NewConnectedLine", b))
					p.emit(dialEvent("DialState", a, b, "DialStatus", "RINGING"))
					p.updateDevice(b.endpoint)
				}
				p.mu.Unlock()
			case e.kind == evResponse && l != nil:
				return c.queueConnect(a, l, legs, ended, target)
			case e.kind == evResponse && e.res.IsSuccess():
				c.byeStale(e.ch)
			case (e.kind == evFail || e.kind == evHangup || e.kind == evNoAck) && l != nil:
				p.mu.Lock()
				cause, tech := 127, 0
				if e.res != nil {
					tech = e.res.StatusCode
					cause = sipToCause(tech)
				}
				if e.kind != evFail {
					l.b.cancelCli()
					cause, tech = 16, 0
				}
				p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", dialStatus(cause)))
				c.hangupChannel(l.b, cause, tech)
				dropLeg(l)
				if len(legs) == 0 {
					retry.Reset(p.cfg.QueueRetry)
				}
				p.mu.Unlock()
			case (e.kind == evBye || e.kind == evHangup || e.kind == evNoAck || e.kind == evCancel) && e.ch == a:
				// Abandoned, in the order of status_actions_during_call.
				p.mu.Lock()
				p.emit(chanEvent("HangupRequest", a))
				p.emit(chanEvent("MusicOnHoldStop", a))
				for _, l := range legs {
					p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "CANCEL"))
					p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "CANCEL"))
				}
				hold := int(p.cfg.Now().Sub(ent.joined) / time.Second)
				p.emit(chanEvent("QueueCallerAbandon", a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(q.position(a)),
					"OriginalPosition", strconv.Itoa(ent.orig), "HoldTime", strconv.Itoa(hold)))
				q.abandoned++
				leave()
				cancelLegs(0)
				p.emit(chanEvent("SoftHangupRequest", a, "Cause", "16"))
				if e.kind != evBye {
					c.sendBye(a, true)
				}
				c.hangupChannel(a, 0, 0)
				cdrs(nil)
				p.mu.Unlock()
				return nil, ""
			case e.kind == evRedirect && e.ch == a:
				p.mu.Lock()
				for _, l := range legs {
					p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "CANCEL"))
				}
				p.emit(chanEvent("MusicOnHoldStop", a))
				leave()
				cancelLegs(0)
				a.context, a.exten, a.priority = e.context, e.exten, 1
				p.mu.Unlock()
				return a, e.exten
			}
		case <-ringT.C:
			// Nobody answered within the member timeout: give them up, try
			// again after the retry pause.
			p.mu.Lock()
			for _, l := range append([]*qleg(nil), legs...) {
				ringMs := strconv.FormatInt(p.cfg.Now().Sub(l.rang).Milliseconds(), 10)
				p.emit(p.agentEvent("AgentRingNoAnswer", a, l.b, "RingTime", ringMs))
				p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "NOANSWER"))
				l.b.cancelCli()
				c.hangupChannel(l.b, 0, 0)
				dropLeg(l)
			}
			retry.Reset(p.cfg.QueueRetry)
			p.mu.Unlock()
		case <-retry.C:
			p.mu.Lock()
			if len(legs) == 0 {
				ring()
				if len(legs) > 0 {
					ringT.Reset(p.cfg.QueueRingTime)
				} else {
					retry.Reset(p.cfg.QueueRetry)
				}
			}
			p.mu.Unlock()
		case <-wait.C:
			// Queue() timed out: the dialplan goes on to Hangup().
			p.mu.Lock()
			for _, l := range legs {
				p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "CANCEL"))
			}
			p.emit(chanEvent("MusicOnHoldStop", a))
			leave()
			cancelLegs(0)
			a.priority = 5
			a.app, a.appData = "Hangup", ""
			p.emit(chanEvent("SoftHangupRequest", a, "Cause", "16"))
			c.sendBye(a, true)
			c.hangupChannel(a, 16, 0)
			cdrs(nil)
			p.mu.Unlock()
			return nil, ""
		case <-c.ctx.Done():
			p.mu.Lock()
			for _, l := range legs {
				p.emit(dialEvent("DialEnd", a, l.b, "DialStatus", "CANCEL"))
			}
			p.emit(chanEvent("MusicOnHoldStop", a))
			leave()
			cancelLegs(0)
			c.sendBye(a, true)
			c.hangupChannel(a, 16, 0)
			cdrs(nil)
			p.mu.Unlock()
			return nil, ""
		}
	}
}

// ringMember creates member m's channel and INVITEs it for caller a, with
// the events of app_queue's ring_entry. p.mu held.
func (c *call) ringMember(a *channel, m *queueMember, target string) *qleg {
	p := c.p
	ct := *p.exts[m.num].contact
	b := p.newChannel(c, m.num)
	b.linkedid = a.linkedid
	b.exten = "s"
	b.accountCode = a.accountCode
	b.app, b.appData = "AppDial", "(Outgoing Line)"
	b.tcp = ct.tcp
	p.emit(chanEvent("Newchannel", b))
	// AgentCalled shows the member's channel as it will be once dialled.
	snap := *b
	snap.conNum, snap.conName, snap.exten = a.cidNum, a.cidName, target
	p.emit(p.agentEvent("AgentCalled", a, &snap))
	p.emit(dialEvent("DialBegin", a, b, "DialString", "PJSIP/"+m.num))
	b.conNum, b.conName, b.exten = a.cidNum, a.cidName, target
	m.ringing = c
	c.invite(b, ct, a.cidNum, a.cidName, p.sdp(p.chanSeq, false))
	return &qleg{b: b, m: m, rang: p.cfg.Now()}
}

// queueConnect: member leg l answered. The other legs are cancelled
// (cause 26, answered elsewhere), the caller leaves the queue and is
// bridged with the member, in the order of the queue_answered recording.
func (c *call) queueConnect(a *channel, l *qleg, legs, ended []*qleg, target string) (*channel, string) {
	p := c.p
	q := p.queue
	p.mu.Lock()
	now := p.cfg.Now()
	b := l.b
	p.stats.Answered++
	b.state = stateUp
	b.answered = now
	p.emit(chanEvent("Newstate", b))
	p.emit(dialEvent("DialEnd", a, b, "DialStatus", "ANSWER"))
	var others []*qleg
	for _, o := range legs {
		if o != l {
			others = append(others, o)
			p.emit(dialEvent("DialEnd", a, o.b, "DialStatus", "CANCEL"))
		}
	}
	a.conNum, a.conName = b.cidNum, b.cidName
	p.emit(chanEvent("NewConnectedLine", a))
	for _, o := range others {
		p.emit(dialEvent("DialEnd", a, o.b, "DialStatus", "CANCEL"))
	}
	p.emit(chanEvent("MusicOnHoldStop", a))
	l.m.ringing = nil
	p.updateDevice(b.endpoint)
	for _, o := range others {
		o.b.cancelCli()
		c.hangupChannel(o.b, 26, 0)
		o.ended = now
		o.m.ringing = nil
		ended = append(ended, o)
	}
	var joined time.Time
	for _, e := range q.waiting {
		if e.ch == a {
			joined = e.joined
		}
	}
	pos := q.position(a)
	q.remove(a)
	if len(q.waiting) == 0 {
		p.queueDevice("NOT_INUSE")
	}
	p.emit(chanEvent("QueueCallerLeave", a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(pos), "Count", strconv.Itoa(len(q.waiting))))
	hold := int(now.Sub(joined) / time.Second)
	p.emit(p.agentEvent("AgentConnect", a, b, "HoldTime", strconv.Itoa(hold), "RingTime", strconv.Itoa(int(now.Sub(l.rang)/time.Second))))
	q.holdTime = (q.holdTime*3 + hold) / 4
	l.m.inCall = true
	c.q = &queueConn{b: b, m: l.m, joined: joined, connected: now, cancelled: ended}
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent("BridgeCreate", br, nil))
	c.enter(br, b)
	c.enter(br, a)
	p.mu.Unlock()
	return c.talk(a, b, target)
}

// agentComplete ends the member's queue call: AgentComplete and the
// statistics (reason caller, agent or transfer). p.mu held.
func (c *call) agentComplete(a *channel, reason string) {
	qc := c.q
	if qc == nil || qc.completed {
		return
	}
	qc.completed = true
	p := c.p
	q := p.queue
	now := p.cfg.Now()
	hold := int(qc.connected.Sub(qc.joined) / time.Second)
	talk := int(now.Sub(qc.connected) / time.Second)
	p.emit(p.agentEvent("AgentComplete", a, qc.b, "HoldTime", strconv.Itoa(hold), "TalkTime", strconv.Itoa(talk), "Reason", reason))
	q.completed++
	q.talkTime = (q.talkTime*3 + talk) / 4
	qc.m.callsTaken++
	qc.m.lastCall = now.Unix()
	qc.m.inCall = false
}

// queueHangupBridged ends a queue call that x (caller a or member b) left,
// as hangupBridged does for Dial, with AgentComplete and the queue's CDRs
// (queue_answered recording). p.mu held.
func (c *call) queueHangupBridged(a, b, x *channel, cause int, byeX bool, target string) {
	p := c.p
	br := a.bridge
	if br == nil {
		br = b.bridge
	}
	p.emit(chanEvent("HangupRequest", x))
	if byeX {
		c.sendBye(x, true)
	}
	if x == a {
		c.sendBye(b, true)
	} else {
		c.sendBye(a, true)
	}
	for _, ch := range []*channel{a, b} {
		if ch.onHold {
			ch.onHold = false
			p.emit(chanEvent("MusicOnHoldStop", ch))
		}
	}
	reason := "caller"
	if x == b {
		reason = "agent"
	}
	c.agentComplete(a, reason)
	if x == a {
		c.leave(a)
		c.leave(b)
		if br != nil {
			p.emit(bridgeEvent("BridgeDestroy", br, nil))
		}
		p.emit(chanEvent("SoftHangupRequest", a, "Cause", strconv.Itoa(cause)))
		c.hangupChannel(b, cause, 0)
	} else {
		c.leave(b)
		c.hangupChannel(b, cause, 0)
		c.leave(a)
		if br != nil {
			p.emit(bridgeEvent("BridgeDestroy", br, nil))
		}
		a.priority = 5 // NoOp(QUEUESTATUS), Hangup()
		p.emit(chanEvent("SoftHangupRequest", a, "Cause", strconv.Itoa(cause)))
	}
	c.hangupChannel(a, cause, 0)
	now := p.cfg.Now()
	data := p.queueData()
	p.cdrAt(a, target, b.name, "Queue", data, a.answered, now, "ANSWERED")
	for _, l := range c.q.cancelled {
		p.cdrAt(a, target, l.b.name, "Queue", data, a.answered, l.ended, "NO ANSWER")
	}
}

// actQueueStatus reports the queue: QueueParams, a QueueMember per member
// and a QueueEntry per waiting caller, as app_queue does.
func (p *PBX) actQueueStatus(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if qn := req.Get("Queue"); qn != "" && qn != p.cfg.Queue {
		return list(req, "Queue status will follow", "QueueStatusComplete", nil)
	}
	q := p.queue
	items := []ami.Message{withTrailingID(item("QueueParams", "Queue", p.cfg.Queue, "Max", "0", "Strategy", p.cfg.QueueStrategy,
		"Calls", strconv.Itoa(len(q.waiting)), "Holdtime", strconv.Itoa(q.holdTime), "TalkTime", strconv.Itoa(q.talkTime),
		"Completed", strconv.Itoa(q.completed), "Abandoned", strconv.Itoa(q.abandoned), "ServiceLevel", "0",
		"ServicelevelPerf", "0.0", "ServicelevelPerf2", "0.0", "Weight", "0"), req)}
	member := req.Get("Member")
	for _, m := range q.members {
		iface := "PJSIP/" + m.num
		if member != "" && member != iface {
			continue
		}
		name, status := m.num, "5"
		if e := p.exts[m.num]; e != nil {
			name, status = e.name, queueMemberStatus(e.dev)
		}
		items = append(items, withTrailingID(item("QueueMember", "Queue", p.cfg.Queue, "Name", name, "Location", iface,
			"StateInterface", iface, "Membership", "static", "Penalty", "0", "CallsTaken", strconv.Itoa(m.callsTaken),
			"LastCall", strconv.FormatInt(m.lastCall, 10), "LastPause", "0", "LoginTime", strconv.FormatInt(p.started.Unix(), 10),
			"InCall", boolNum(m.inCall), "Status", status, "Paused", boolNum(m.paused), "PausedReason", m.reason, "Wrapuptime", "0"), req))
	}
	if member == "" {
		now := p.cfg.Now()
		for i, e := range q.waiting {
			a := e.ch
			items = append(items, withTrailingID(item("QueueEntry", "Queue", p.cfg.Queue, "Position", strconv.Itoa(i+1),
				"Channel", a.name, "Uniqueid", a.uniqueid, "CallerIDNum", orUnknown(a.cidNum), "CallerIDName", orUnknown(a.cidName),
				"ConnectedLineNum", orUnknown(a.conNum), "ConnectedLineName", orUnknown(a.conName),
				"Wait", strconv.Itoa(int(now.Sub(e.joined)/time.Second)), "Priority", "0"), req))
		}
	}
	return list(req, "Queue status will follow", "QueueStatusComplete", items)
}

// actQueuePause pauses or unpauses a member (in the given queue, or in
// every queue when none is given), as app_queue's QueuePause does: the
// member is not rung while paused, and QueueMemberPause reports it.
func (p *PBX) actQueuePause(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	iface := req.Get("Interface")
	if iface == "" {
		return errResp("Need 'Interface' and 'Paused' actions.")
	}
	if qn := req.Get("Queue"); qn != "" && qn != p.cfg.Queue {
		return errResp("Interface not found")
	}
	paused := strings.EqualFold(req.Get("Paused"), "true") || req.Get("Paused") == "1"
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.queue.members {
		if "PJSIP/"+m.num != iface {
			continue
		}
		m.paused, m.reason = paused, ""
		if paused {
			m.reason = req.Get("Reason")
		}
		p.emit(p.memberEvent("QueueMemberPause", m))
		return []ami.Message{resp("Success", "Message", "Interface paused successfully")}
	}
	return errResp("Interface not found")
}
