package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Dynamic queue members and the queue summary, as app_queue's QueueAdd,
// QueueRemove and QueueSummary (queue_dynamic_members recording).

// memberExten is the extension behind a queue interface: PJSIP/201,
// Local/201@from-queue/n.
func memberExten(iface string) string {
	_, rest, ok := strings.Cut(iface, "/")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "@/"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func (p *PBX) actQueueAdd(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	qn, iface := req.Get("Queue"), req.Get("Interface")
	switch {
	case qn == "":
		return errResp("'Queue' not specified.")
	case iface == "":
		return errResp("'Interface' not specified.")
	case qn != p.cfg.Queue:
		return errResp("Unable to add interface to queue: No such queue")
	}
	num := memberExten(iface)
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	for _, m := range q.members {
		if m.iface == iface || m.num == num {
			return errResp("Unable to add interface: Already there")
		}
	}
	now := p.cfg.Now().Unix()
	m := &queueMember{num: num, iface: iface, name: req.Get("MemberName"), dynamic: true, loginTime: now}
	if astTrue(req.Get("Paused")) {
		m.paused, m.reason, m.lastPause = true, req.Get("Reason"), now
	}
	q.members = append(q.members, m)
	q.byNum[num] = m
	p.emit(p.memberEvent(ami.EventQueueMemberAdded, m))
	return []ami.Message{resp("Success", "Message", "Added interface to queue")}
}

func (p *PBX) actQueueRemove(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	qn, iface := req.Get("Queue"), req.Get("Interface")
	if qn == "" || iface == "" {
		return errResp("Need 'Queue' and 'Interface' parameters.")
	}
	if qn != p.cfg.Queue {
		return errResp("Unable to remove interface from queue: No such queue")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	for i, m := range q.members {
		if m.iface != iface {
			continue
		}
		if !m.dynamic {
			return errResp("Member not dynamic")
		}
		q.members = append(q.members[:i], q.members[i+1:]...)
		delete(q.byNum, m.num)
		q.rrNext = 0
		p.emit(p.memberEvent(ami.EventQueueMemberRemoved, m))
		return []ami.Message{resp("Success", "Message", "Removed interface from queue")}
	}
	return errResp("Unable to remove interface: Not there")
}

// actQueueSummary reports, per queue, the members logged in (not
// unavailable), those available (idle and not paused), the waiting
// callers and the running hold and talk averages.
func (p *PBX) actQueueSummary(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if qn := req.Get("Queue"); qn != "" && qn != p.cfg.Queue {
		return list(req, "Queue summary will follow", ami.EventQueueSummaryComplete, nil)
	}
	q := p.queue
	loggedIn, available := 0, 0
	for _, m := range q.members {
		_, status := p.memberNameStatus(m)
		if status == "5" {
			continue
		}
		loggedIn++
		if status == "1" && !m.paused {
			available++
		}
	}
	longest := 0
	now := p.cfg.Now()
	for _, e := range q.waiting {
		longest = max(longest, int(now.Sub(e.joined)/time.Second))
	}
	it := withTrailingID(item(ami.EventQueueSummary, "Queue", p.cfg.Queue, "LoggedIn", strconv.Itoa(loggedIn),
		"Available", strconv.Itoa(available), "Callers", strconv.Itoa(len(q.waiting)),
		"HoldTime", strconv.Itoa(q.holdTime), "TalkTime", strconv.Itoa(q.talkTime),
		"LongestHoldTime", strconv.Itoa(longest)), req)
	return list(req, "Queue summary will follow", ami.EventQueueSummaryComplete, []ami.Message{it})
}
