package pbxsim

import (
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Queue members that are Local channels, as FreePBX writes them
// (Local/<ext>@from-queue/n, state interface hint:<ext>@ext-local): the
// queue dials the Local pair and its ;2 dials the phone
// (queue_local_members).

// local reports whether m is rung through a Local pair.
func (m *queueMember) local() bool { return strings.HasPrefix(m.iface, "Local/") }

// stateIface is m's StateInterface: the device for PJSIP/<m>, FreePBX's
// hint for a Local member.
func (m *queueMember) stateIface() string {
	if m.local() {
		return "hint:" + m.num + "@ext-local"
	}
	return "PJSIP/" + m.num
}

// ringLocalMember rings Local member m for caller a: the Local pair
// (;1 takes the number a dialled as its caller ID), AgentCalled and
// DialBegin to ;1, then ;2 dials the phone. p.mu held.
func (c *call) ringLocalMember(a *channel, m *queueMember, target string) *qleg {
	p := c.p
	lg := c.newLocalLeg(a, m.num, contextFromQueue, c.dialledNumber(a), m.iface, func(l1 *channel) {
		p.emit(p.agentEvent(ami.EventAgentCalled, a, l1, m))
	})
	m.ringing = c
	c.localDial(a, lg)
	return &qleg{lg: lg, b: lg.front, m: m, rang: p.cfg.Now()}
}

// endQLeg ends member leg l that is not connected: status is the
// caller's DialEnd for it ("" none). p.mu held.
func (c *call) endQLeg(a *channel, l *qleg, cause, tech int, status string) {
	if l.lg != nil {
		c.dropLeg(a, l.lg, cause, status)
		return
	}
	if status != "" {
		c.p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", status))
	}
	if l.b.cancelCli != nil {
		l.b.cancelCli()
	}
	c.hangupChannel(l.b, cause, tech)
}

// queueConnectLocal: Local member leg l's phone answered, in the order
// of queue_local_members: the phone bridged with ;2, the caller's
// DialEnds, the other members cancelled (cause 26), the caller leaves
// the queue (AgentConnect names the Local interface) and is bridged with
// ;1.
func (c *call) queueConnectLocal(a *channel, l *qleg, legs, ended []*qleg, target string, answer []byte) (*channel, string) {
	p := c.p
	q := p.queue
	p.mu.Lock()
	now := p.cfg.Now()
	p.stats.Answered++
	c.legAnswered(l.lg, answer)
	l.m.inCall = true
	p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", "ANSWER"))
	c.mediaTo(a, answer) // the caller was answered by Queue() itself
	var others []*qleg
	for _, o := range legs {
		if o != l {
			others = append(others, o)
			p.emit(dialEvent(ami.EventDialEnd, a, o.b, "DialStatus", "CANCEL"))
			p.emit(dialEvent(ami.EventDialEnd, a, o.b, "DialStatus", "CANCEL"))
		}
	}
	for _, o := range others {
		c.endQLeg(a, o, 26, 0, "")
		o.ended = now
		o.m.ringing = nil
		ended = append(ended, o)
	}
	p.emit(chanEvent(ami.EventMusicOnHoldStop, a))
	l.m.ringing = nil
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
	c.legBridged(l.lg)
	hold := int(now.Sub(joined) / time.Second)
	p.emit(p.agentEvent(ami.EventAgentConnect, a, l.b, l.m, "HoldTime", strconv.Itoa(hold), "RingTime", strconv.Itoa(int(now.Sub(l.rang)/time.Second))))
	q.holdTime = (q.holdTime*3 + hold) / 4
	c.q = &queueConn{b: l.b, m: l.m, joined: joined, connected: now, cancelled: ended}
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
	c.enter(br, l.b)
	c.enter(br, a)
	p.updateDevice(l.lg.phone.endpoint)
	var fl []*forkLeg
	for _, o := range ended {
		if o.lg != nil {
			fl = append(fl, o.lg)
		} else {
			fl = append(fl, &forkLeg{front: o.b, ended: o.ended})
		}
	}
	p.mu.Unlock()
	return c.talkLocal(a, l.lg, target, fl)
}

// dialledNumber is the number a's caller dialled (a trunk call's DID,
// which a queue's Local ;1 shows as its caller ID). p.mu held.
func (c *call) dialledNumber(a *channel) string {
	if a.did != "" {
		return a.did
	}
	return a.exten
}
