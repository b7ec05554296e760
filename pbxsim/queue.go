package pbxsim

import (
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
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
	// The calls completed and abandoned within the service level
	// (Config.QueueServiceLevel), as app_queue counts them.
	completedInSL, abandonedInSL int
	rrNext                       int // rrmemory: the member to try first
}

type queueMember struct {
	num        string
	iface      string // Interface: PJSIP/<num>, or as QueueAdd gave it
	name       string // MemberName given by QueueAdd ("": the endpoint's name)
	dynamic    bool   // added by QueueAdd: QueueRemove may remove it
	loginTime  int64  // unix seconds it joined the queue
	lastPause  int64  // unix seconds of its last pause, 0 if never
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
	lg    *forkLeg // a Local member's leg (b is its ;1); nil for PJSIP/<m>
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

// newQueueState is the queue with its static members: PJSIP/<m>, or
// FreePBX's Local/<m>@from-queue/n (local).
func newQueueState(members []string, started time.Time, local bool) *queueState {
	q := &queueState{byNum: map[string]*queueMember{}}
	for _, m := range members {
		qm := &queueMember{num: m, iface: "PJSIP/" + m, loginTime: started.Unix()}
		if local {
			qm.iface = "Local/" + m + "@" + contextFromQueue + "/n"
		}
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
	opts := ",tT,,,"
	if p.freepbx() {
		opts = ",t,,," // ext-queues (queue_local_members)
	}
	return p.cfg.Queue + opts + strconv.Itoa(int(p.cfg.QueueTimeout/time.Second))
}

// queueMemberEvent is QueueMemberStatus for m. p.mu held.
func (p *PBX) queueMemberEvent(m *queueMember) ami.Message {
	return p.memberEvent(ami.EventQueueMemberStatus, m)
}

// memberEvent is QueueMemberStatus, QueueMemberPause, QueueMemberAdded
// or QueueMemberRemoved for m. p.mu held.
func (p *PBX) memberEvent(event string, m *queueMember) ami.Message {
	name, status := p.memberNameStatus(m)
	membership := "static"
	if m.dynamic {
		membership = "dynamic"
	}
	return ami.NewMessage(append(amievent.Head(event, "agent,all", 18),
		ami.Header{Key: "Queue", Value: p.cfg.Queue}, ami.Header{Key: "MemberName", Value: name},
		ami.Header{Key: "Interface", Value: m.iface}, ami.Header{Key: "StateInterface", Value: m.stateIface()},
		ami.Header{Key: "Membership", Value: membership}, ami.Header{Key: "Penalty", Value: "0"},
		ami.Header{Key: "CallsTaken", Value: strconv.Itoa(m.callsTaken)},
		ami.Header{Key: "LastCall", Value: strconv.FormatInt(m.lastCall, 10)},
		ami.Header{Key: "LastPause", Value: strconv.FormatInt(m.lastPause, 10)},
		ami.Header{Key: "LoginTime", Value: strconv.FormatInt(m.loginTime, 10)},
		ami.Header{Key: "InCall", Value: boolNum(m.inCall)}, ami.Header{Key: "Status", Value: status},
		ami.Header{Key: "Paused", Value: boolNum(m.paused)}, ami.Header{Key: "PausedReason", Value: m.reason},
		ami.Header{Key: "Ringinuse", Value: "0"}, ami.Header{Key: "Wrapuptime", Value: "0"})...)
}

// memberNameStatus is m's MemberName and app_queue Status (1 not in use,
// 5 unavailable, ...). p.mu held.
func (p *PBX) memberNameStatus(m *queueMember) (name, status string) {
	name, status = m.num, "5"
	if e := p.exts[m.num]; e != nil {
		name, status = e.name, queueMemberStatus(e.hint)
	}
	if m.name != "" {
		name = m.name
	}
	return name, status
}

func boolNum(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (p *PBX) queueDevice(state string) {
	p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
		ami.Header{Key: "Device", Value: "Queue:" + p.cfg.Queue}, ami.Header{Key: "State", Value: state})...))
}

// agentEvent is AgentCalled, AgentConnect, AgentComplete... p.mu held.
func (p *PBX) agentEvent(name string, a, b *channel, m *queueMember, kv ...string) ami.Message {
	member, _ := p.memberNameStatus(m)
	as, bs := a.snap(), b.snap()
	return amievent.PairEvent(name, "agent,all", &as, "Dest", &bs, append([]string{"Queue", p.cfg.Queue, "Interface", m.iface, "MemberName", member}, kv...)...)
}

// queueEvent is an app_queue event about caller a (QueueCallerJoin,
// QueueCallerLeave, QueueCallerAbandon): agent,all, as recorded.
func queueEvent(name string, a *channel, kv ...string) ami.Message {
	s := a.snap()
	return amievent.PairEvent(name, "agent,all", nil, "", &s, kv...)
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
		if m.ringing != nil || m.paused || e == nil || e.contact == nil || e.hint != devNotInUse {
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
	w := c.queueJoin(a, target)
	wait := time.NewTimer(p.cfg.QueueTimeout)
	defer wait.Stop()
	ringT := time.NewTimer(p.cfg.QueueRingTime)
	defer ringT.Stop()
	retry := time.NewTimer(p.cfg.QueueRetry)
	defer retry.Stop()
	for {
		select {
		case e := <-c.events:
			if next, tgt, over := w.event(e, retry); over {
				return next, tgt
			}
		case <-ringT.C:
			// Nobody answered within the member timeout: give them up, try
			// again after the retry pause.
			w.ringTimeout()
			retry.Reset(p.cfg.QueueRetry)
		case <-retry.C:
			p.mu.Lock()
			if len(w.legs) == 0 {
				w.ring()
				if len(w.legs) > 0 {
					ringT.Reset(p.cfg.QueueRingTime)
				} else {
					retry.Reset(p.cfg.QueueRetry)
				}
			}
			p.mu.Unlock()
		case <-wait.C:
			// Queue() timed out: the dialplan goes on to Hangup().
			w.stop(true)
			return nil, ""
		case <-c.ctx.Done():
			w.stop(false)
			return nil, ""
		}
	}
}

// ringMember creates member m's channel and INVITEs it for caller a, with
// the events of app_queue's ring_entry. p.mu held.
func (c *call) ringMember(a *channel, m *queueMember, target string) *qleg {
	if m.local() {
		return c.ringLocalMember(a, m, target)
	}
	p := c.p
	b, ct := c.newLeg(a, m.num)
	// AgentCalled shows the member's channel as it will be once dialled,
	// the other events as last published: ring_entry sets the account
	// code and connected line without publishing, the first Newstate's
	// snapshot reports them.
	snap := *b
	snap.conNum, snap.conName, snap.exten, snap.accountCode = a.cidNum, a.cidName, target, a.accountCode
	p.emit(p.agentEvent(ami.EventAgentCalled, a, &snap, m))
	p.emit(dialEvent(ami.EventDialBegin, a, b, "DialString", m.iface))
	b.conNum, b.conName, b.exten = a.cidNum, a.cidName, target
	m.ringing = c
	offer := a.sdp // the caller's media: the member talks to it directly
	if len(offer) == 0 {
		offer = p.sdp(p.chanSeq, false)
	}
	c.invite(b, ct, a.cidNum, a.cidName, offer)
	return &qleg{b: b, m: m, rang: p.cfg.Now()}
}

// queueConnect: member leg l answered. The other legs are cancelled
// (cause 26, answered elsewhere), the caller leaves the queue and is
// bridged with the member, in the order of the queue_answered recording.
func (c *call) queueConnect(a *channel, l *qleg, legs, ended []*qleg, target string, answer []byte) (*channel, string) {
	if l.lg != nil {
		return c.queueConnectLocal(a, l, legs, ended, target, answer)
	}
	p := c.p
	q := p.queue
	p.mu.Lock()
	now := p.cfg.Now()
	b := l.b
	p.stats.Answered++
	if b.state != stateUp { // a picker is up already
		b.state = stateUp
		b.answered = now
		p.emit(chanEvent(ami.EventNewstate, b))
		p.setAccountCode(b, a.accountCode)
	}
	b.sdp = answer
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", "ANSWER"))
	c.mediaTo(a, answer) // the caller was answered by Queue() itself
	var others []*qleg
	for _, o := range legs {
		if o != l {
			others = append(others, o)
			p.emit(dialEvent(ami.EventDialEnd, a, o.b, "DialStatus", "CANCEL"))
		}
	}
	a.conNum, a.conName = b.cidNum, b.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, a))
	for _, o := range others {
		p.emit(dialEvent(ami.EventDialEnd, a, o.b, "DialStatus", "CANCEL"))
	}
	p.emit(chanEvent(ami.EventMusicOnHoldStop, a))
	l.m.ringing = nil
	p.updateDevice(b.endpoint)
	for _, o := range others {
		c.endQLeg(a, o, 26, 0, "")
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
	p.emit(queueEvent(ami.EventQueueCallerLeave, a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(pos), "Count", strconv.Itoa(len(q.waiting))))
	hold := int(now.Sub(joined) / time.Second)
	p.emit(p.agentEvent(ami.EventAgentConnect, a, b, l.m, "HoldTime", strconv.Itoa(hold), "RingTime", strconv.Itoa(int(now.Sub(l.rang)/time.Second))))
	q.holdTime = (q.holdTime*3 + hold) / 4
	l.m.inCall = true
	c.q = &queueConn{b: b, m: l.m, joined: joined, connected: now, cancelled: ended}
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
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
	p.emit(p.agentEvent(ami.EventAgentComplete, a, qc.b, qc.m, "HoldTime", strconv.Itoa(hold), "TalkTime", strconv.Itoa(talk), "Reason", reason))
	q.completed++
	if hold <= p.serviceLevel() { // update_queue's callcompletedinsl, decided at the connect
		q.completedInSL++
	}
	q.talkTime = (q.talkTime*3 + talk) / 4
	qc.m.callsTaken++
	qc.m.lastCall = now.Unix()
	qc.m.inCall = false
}
