package pbxsim

import (
	"context"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// serviceLevel is the queue's service level in whole seconds. p.mu held.
func (p *PBX) serviceLevel() int { return int(p.cfg.QueueServiceLevel / time.Second) }

// perf is app_queue's service level percentage, n of all, one decimal
// ("0.0" when there are none).
func perf(n, all int) string {
	if all == 0 {
		return "0.0"
	}
	return strconv.FormatFloat(100*float64(n)/float64(all), 'f', 1, 64)
}

// actQueueStatus reports the queue: QueueParams, a QueueMember per member
// and a QueueEntry per waiting caller, as app_queue does.
func (p *PBX) actQueueStatus(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if qn := req.Get("Queue"); qn != "" && qn != p.cfg.Queue {
		return list(req, "Queue status will follow", ami.EventQueueStatusComplete, nil)
	}
	q := p.queue
	items := []ami.Message{withTrailingID(item(ami.EventQueueParams, "Queue", p.cfg.Queue, "Max", "0", "Strategy", p.cfg.QueueStrategy,
		"Calls", strconv.Itoa(len(q.waiting)), "Holdtime", strconv.Itoa(q.holdTime), "TalkTime", strconv.Itoa(q.talkTime),
		"Completed", strconv.Itoa(q.completed), "Abandoned", strconv.Itoa(q.abandoned), "ServiceLevel", strconv.Itoa(p.serviceLevel()),
		"ServicelevelPerf", perf(q.completedInSL, q.completed), "ServicelevelPerf2", perf(q.completedInSL+q.abandonedInSL, q.completed+q.abandoned),
		"Weight", "0"), req)}
	member := req.Get("Member")
	for _, m := range q.members {
		if member != "" && member != m.iface {
			continue
		}
		name, status := p.memberNameStatus(m)
		membership := "static"
		if m.dynamic {
			membership = "dynamic"
		}
		items = append(items, withTrailingID(item(ami.EventQueueMember, "Queue", p.cfg.Queue, "Name", name, "Location", m.iface,
			"StateInterface", m.stateIface(), "Membership", membership, "Penalty", "0", "CallsTaken", strconv.Itoa(m.callsTaken),
			"LastCall", strconv.FormatInt(m.lastCall, 10), "LastPause", strconv.FormatInt(m.lastPause, 10), "LoginTime", strconv.FormatInt(m.loginTime, 10),
			"InCall", boolNum(m.inCall), "Status", status, "Paused", boolNum(m.paused), "PausedReason", m.reason, "Wrapuptime", "0"), req))
	}
	if member == "" {
		now := p.cfg.Now()
		for i, e := range q.waiting {
			a := e.ch
			items = append(items, withTrailingID(item(ami.EventQueueEntry, "Queue", p.cfg.Queue, "Position", strconv.Itoa(i+1),
				"Channel", a.name, "Uniqueid", a.uniqueid, "CallerIDNum", amievent.OrUnknown(a.cidNum), "CallerIDName", amievent.OrUnknown(a.cidName),
				"ConnectedLineNum", amievent.OrUnknown(a.conNum), "ConnectedLineName", amievent.OrUnknown(a.conName),
				"Wait", strconv.Itoa(int(now.Sub(e.joined)/time.Second)), "Priority", "0"), req))
		}
	}
	return list(req, "Queue status will follow", ami.EventQueueStatusComplete, items)
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
	paused := astTrue(req.Get("Paused"))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.queue.members {
		if m.iface != iface {
			continue
		}
		m.paused, m.reason = paused, ""
		if paused {
			m.reason = req.Get("Reason")
			m.lastPause = p.cfg.Now().Unix()
		}
		p.emit(p.memberEvent(ami.EventQueueMemberPause, m))
		if !paused {
			return []ami.Message{resp("Success", "Message", "Interface unpaused successfully")}
		}
		return []ami.Message{resp("Success", "Message", "Interface paused successfully")}
	}
	return errResp("Interface not found")
}
