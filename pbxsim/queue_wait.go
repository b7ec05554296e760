package pbxsim

import (
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// queueWait is one caller waiting in Queue(): the member legs ringing for
// it and those that rang in vain (for their Cdrs). Owned by the call's
// goroutine; its methods take p.mu unless they say it is held.
type queueWait struct {
	c           *call
	a           *channel
	target      string
	ent         *queueEntry
	legs, ended []*qleg
}

// queueJoin answers a and puts it in the queue (QueueCallerJoin, music on
// hold), then rings the free members.
func (c *call) queueJoin(a *channel, target string) *queueWait {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	if a.context == "from-trunk" {
		a.context = p.cfg.Context // Goto(from-internal,${EXTEN},1)
	}
	if p.freepbx() {
		a.context, a.exten = contextExtQueues, target
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
	p.emit(queueEvent(ami.EventQueueCallerJoin, a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(ent.orig), "Count", strconv.Itoa(len(q.waiting))))
	p.emit(chanEvent(ami.EventMusicOnHoldStart, a, "Class", "default"))
	w := &queueWait{c: c, a: a, target: target, ent: ent}
	w.ring()
	return w
}

func (w *queueWait) legOf(ch *channel) *qleg {
	for _, l := range w.legs {
		if l.b == ch || l.lg != nil && (l.lg.phone == ch || l.lg.l2 == ch) {
			return l
		}
	}
	return nil
}

func (w *queueWait) dropLeg(l *qleg) {
	for i, x := range w.legs {
		if x == l {
			w.legs = append(w.legs[:i], w.legs[i+1:]...)
			break
		}
	}
	l.ended = w.c.p.cfg.Now()
	l.m.ringing = nil
	w.ended = append(w.ended, l)
}

// ring rings the free members. p.mu held.
func (w *queueWait) ring() {
	for _, m := range w.c.p.freeMembers() {
		w.legs = append(w.legs, w.c.ringMember(w.a, m, w.target))
	}
}

// cancelLegs ends every ringing leg, as when the caller leaves. p.mu held.
func (w *queueWait) cancelLegs(cause int) {
	for _, l := range append([]*qleg(nil), w.legs...) {
		w.c.endQLeg(w.a, l, cause, 0, "")
		w.dropLeg(l)
	}
}

// cdrs emits the Cdrs of a caller that left unconnected: one per member
// that rang, or one without destination. p.mu held.
func (w *queueWait) cdrs() {
	p, a := w.c.p, w.a
	now := p.cfg.Now()
	for _, l := range w.ended {
		p.cdrAt(a, w.target, l.b.name, "Queue", a.appData, a.answered, l.ended, "NO ANSWER")
	}
	if len(w.ended) == 0 {
		p.cdrAt(a, w.target, "", "Queue", a.appData, a.answered, now, "ANSWERED")
	}
}

// leave takes the caller out of the queue (QueueCallerLeave). p.mu held.
func (w *queueWait) leave() {
	p, q := w.c.p, w.c.p.queue
	pos := q.position(w.a)
	q.remove(w.a)
	if len(q.waiting) == 0 {
		p.queueDevice("NOT_INUSE")
	}
	p.emit(queueEvent(ami.EventQueueCallerLeave, w.a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(pos), "Count", strconv.Itoa(len(q.waiting))))
}

// event applies one call event; over reports that Queue() is done, with
// where the dialplan goes on (nil: the call ended).
func (w *queueWait) event(e callEvent, retry *time.Timer) (next *channel, target string, over bool) {
	c, p, a := w.c, w.c.p, w.a
	l := w.legOf(e.ch)
	switch {
	case e.kind == evResponse && l != nil && l.lg != nil && e.res.IsProvisional():
		p.mu.Lock()
		c.legRinging(a, l.lg, true)
		p.mu.Unlock()
	case e.kind == evResponse && l != nil && e.res.IsProvisional():
		p.mu.Lock()
		b := l.b
		if b.state != stateRinging && b.state != stateUp {
			b.state = stateRinging
			p.emit(chanEvent(ami.EventNewstate, b))
			p.setAccountCode(b, a.accountCode)
			p.emit(chanEvent(ami.EventNewConnectedLine, b))
			p.emit(dialEvent(ami.EventDialState, a, b, "DialStatus", "RINGING"))
			p.updateDevice(b.endpoint)
		}
		p.mu.Unlock()
	case e.kind == evResponse && l != nil:
		next, target = c.queueConnect(a, l, w.legs, w.ended, w.target, e.res.Body())
		return next, target, true
	case e.kind == evPickup && l != nil:
		next, target = w.pickedUp(l, e)
		return next, target, true
	case e.kind == evResponse && e.res.IsSuccess():
		c.byeStale(e.ch)
	case (e.kind == evFail || e.kind == evHangup || e.kind == evNoAck) && l != nil:
		p.mu.Lock()
		cause, tech := 127, 0
		if e.res != nil {
			tech = e.res.StatusCode
			cause = sipToCause(tech)
		}
		switch {
		case e.kind == evFail && l.lg != nil:
			c.legFailed(a, l.lg, cause, tech)
		case e.kind != evFail:
			c.endQLeg(a, l, 16, 0, "CANCEL")
		default:
			c.endQLeg(a, l, cause, tech, dialStatus(cause))
		}
		w.dropLeg(l)
		if len(w.legs) == 0 {
			retry.Reset(p.cfg.QueueRetry)
		}
		p.mu.Unlock()
	case (e.kind == evBye || e.kind == evHangup || e.kind == evNoAck || e.kind == evCancel) && e.ch == a:
		w.abandon(e.kind != evBye)
		return nil, "", true
	case e.kind == evRedirect && e.ch == a:
		p.mu.Lock()
		for _, l := range w.legs {
			p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", "CANCEL"))
		}
		p.emit(chanEvent(ami.EventMusicOnHoldStop, a))
		w.leave()
		w.cancelLegs(0)
		a.context, a.exten, a.priority = e.context, e.exten, 1
		p.mu.Unlock()
		return a, e.exten, true
	}
	return nil, "", false
}

// abandon: the caller hung up while waiting, in the order of
// status_actions_during_call. bye: its dialog still needs our BYE.
func (w *queueWait) abandon(bye bool) {
	c, p, a, q := w.c, w.c.p, w.a, w.c.p.queue
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emit(chanEvent(ami.EventHangupRequest, a))
	p.emit(chanEvent(ami.EventMusicOnHoldStop, a))
	for _, l := range w.legs {
		p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", "CANCEL"))
		p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", "CANCEL"))
	}
	hold := int(p.cfg.Now().Sub(w.ent.joined) / time.Second)
	p.emit(queueEvent(ami.EventQueueCallerAbandon, a, "Queue", p.cfg.Queue, "Position", strconv.Itoa(q.position(a)),
		"OriginalPosition", strconv.Itoa(w.ent.orig), "HoldTime", strconv.Itoa(hold)))
	q.abandoned++
	if hold <= p.serviceLevel() { // record_abandoned
		q.abandonedInSL++
	}
	w.leave()
	w.cancelLegs(0)
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
	if bye {
		c.sendBye(a, true)
	}
	c.hangupChannel(a, 0, 0)
	w.cdrs()
}

// ringTimeout gives up the members ringing for longer than the member
// timeout (AgentRingNoAnswer).
func (w *queueWait) ringTimeout() {
	c, p, a := w.c, w.c.p, w.a
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range append([]*qleg(nil), w.legs...) {
		ringMs := strconv.FormatInt(p.cfg.Now().Sub(l.rang).Milliseconds(), 10)
		p.emit(p.agentEvent(ami.EventAgentRingNoAnswer, a, l.b, l.m, "RingTime", ringMs))
		c.endQLeg(a, l, 0, 0, "NOANSWER")
		w.dropLeg(l)
	}
}

// stop ends the wait from our side: Queue()'s timeout (then the
// dialplan's Hangup()) or the simulator's shutdown.
func (w *queueWait) stop(timeout bool) {
	c, p, a := w.c, w.c.p, w.a
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range w.legs {
		p.emit(dialEvent(ami.EventDialEnd, a, l.b, "DialStatus", "CANCEL"))
	}
	p.emit(chanEvent(ami.EventMusicOnHoldStop, a))
	w.leave()
	w.cancelLegs(0)
	if timeout {
		a.priority = 5
		a.app, a.appData = "Hangup", ""
		p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
	}
	c.sendBye(a, true)
	c.hangupChannel(a, 16, 0)
	w.cdrs()
}

// pickedUp: the picker e.other takes the call ringing member leg l (a
// directed pickup of a queue call): the leg is cancelled (cause 26) and
// the picker connects as that member would have.
func (w *queueWait) pickedUp(l *qleg, e callEvent) (*channel, string) {
	c, p, a := w.c, w.c.p, w.a
	d := e.other
	p.mu.Lock()
	if d.gone || l.b.gone {
		p.mu.Unlock()
		e.reply <- false
		return nil, "" // not reached in practice: the caller would be left waiting
	}
	d.call = c
	e.reply <- true
	picked := l.b
	if l.lg != nil {
		picked = l.lg.phone // a Local member's phone, behind its pair
	}
	p.emit(pickupEvent(d, picked))
	if l.lg == nil {
		p.emit(chanEvent(ami.EventSoftHangupRequest, l.b, "Cause", "16"))
	}
	c.endQLeg(a, l, 26, 0, "")
	w.dropLeg(l)
	p.mu.Unlock()
	return c.queueConnect(a, &qleg{b: d, m: l.m, rang: l.rang}, w.legs, w.ended, w.target, d.sdp)
}
