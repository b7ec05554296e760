package calls

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

type queueState struct {
	name      string
	number    string              // the number callers dial to reach it, learnt from QueueCallerJoin
	members   cowMap[QueueMember] // by member key
	waiting   cowMap[QueueCaller] // by channel name
	pieces    *memberPieces       // the members' JSON as last published (queuepieces.go)
	completed int
	abandoned int
	holdTime  int
	talkTime  int
	// app_queue's service level: its seconds, the completed calls
	// answered within it and the abandoned ones within it (onQueueParams,
	// onAgentComplete, onQueueCallerLeave).
	serviceLevel, completedInSL, abandonedInSL int

	// During a resync: what the QueueStatus answer listed, and what live
	// events changed since it began (see resyncState).
	listed        bool
	listedMembers map[string]bool
	listedWaiting map[string]bool
	memberAt      map[string]uint64
	waitingAt     map[string]uint64
}

func parseInt(s string) (int, error) { return strconv.Atoi(strings.TrimSpace(s)) }

// kept is s to store in place of was: was itself when they are equal, so
// an event that repeats what a member or caller holds allocates no copy
// of the event's bytes.
func kept(was, s string) string {
	if s == was {
		return was
	}
	return strings.Clone(s)
}

func (e *Engine) ensureQueue(name string) *queueState {
	q := e.queues[name]
	if q == nil {
		q = &queueState{name: strings.Clone(name), members: newCowMap[QueueMember](), waiting: newCowMap[QueueCaller]()}
		if n := e.cfg.QueueNumbers[name]; n != name && isDialString(n) {
			q.number = n
		}
		e.queues[q.name] = q
	}
	e.dirtyQueue[q.name] = struct{}{}
	return q
}

// queueOf returns the queue an event names, or nil.
func (e *Engine) queueOf(m ami.Message) *queueState {
	name := m.Get("Queue")
	if name == "" {
		return nil
	}
	return e.ensureQueue(name)
}

// memberKeyOf derives the member key from StateInterface, Interface or
// Location: PJSIP/203 -> "203"; Local/203@from-queue/n -> "203";
// FreePBX's state interface hint:203@ext-local -> "203".
func memberKeyOf(m ami.Message) string {
	for _, k := range [...]string{"StateInterface", "Interface", "Location"} {
		v := m.Get(k)
		if v == "" {
			continue
		}
		if i := strings.IndexAny(v, "/:"); i >= 0 {
			v = v[i+1:]
		}
		if i := strings.IndexAny(v, "@/"); i >= 0 {
			v = v[:i]
		}
		if v != "" {
			return v
		}
	}
	return ""
}

func (e *Engine) touchMember(q *queueState, key string) {
	e.dirtyQueue[q.name] = struct{}{}
	e.dirtyMember[memberKey{q.name, key}] = struct{}{}
	if e.resync.active && q.listedMembers != nil {
		q.listedMembers[key] = true
	}
}

func (e *Engine) onQueueParams(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	q.completed = atoi(m.Get("Completed"))
	q.abandoned = atoi(m.Get("Abandoned"))
	q.holdTime = atoi(m.Get("Holdtime"))
	q.talkTime = atoi(m.Get("TalkTime"))
	// QueueStatus gives the service level's counts as percentages only
	// (one decimal): the counts back, exact up to about 1,000 calls, then
	// within one; live events keep them exact from here.
	q.serviceLevel = atoi(m.Get("ServiceLevel"))
	perf, perf2 := atof(m.Get("ServicelevelPerf")), atof(m.Get("ServicelevelPerf2"))
	q.completedInSL = int(math.Round(perf * float64(q.completed) / 100))
	q.abandonedInSL = max(0, int(math.Round(perf2*float64(q.completed+q.abandoned)/100))-q.completedInSL)
	if e.resync.active && !q.listed {
		q.listed = true
		q.listedMembers = map[string]bool{}
		q.listedWaiting = map[string]bool{}
	}
}

func (e *Engine) onQueueMember(m ami.Message) {
	q := e.queueOf(m)
	key := memberKeyOf(m)
	if q == nil || key == "" {
		return
	}
	if e.staleQueueItem(q, m, false, key) {
		e.touchMember(q, key) // listed: a live event knows better
		return
	}
	e.stampQueue(q, m, false, key)
	mb, _ := q.members.get(key)
	mb.Queue, mb.Member = q.name, kept(mb.Member, key)
	name := m.Get("MemberName")
	if name == "" {
		name = m.Get("Name")
	}
	if name != "" {
		mb.Name = kept(mb.Name, name)
	}
	switch strings.ToLower(m.Get("Membership")) {
	case "static":
		mb.Type = "static"
	case "dynamic", "realtime":
		mb.Type = "dynamic"
	}
	if v, ok := m.Lookup("Paused"); ok {
		mb.Paused = strings.TrimSpace(v) == "1"
	}
	if v, ok := m.Lookup("PausedReason"); ok {
		mb.PausedReason = kept(mb.PausedReason, v)
	}
	if v, ok := m.Lookup("CallsTaken"); ok {
		mb.CallsTaken = atoi(v)
	}
	if v, ok := m.Lookup("LastCall"); ok {
		mb.LastCall = int64(atoi(v)) * 1000
	}
	if v, ok := m.Lookup("LastPause"); ok {
		mb.LastPause = int64(atoi(v)) * 1000
	}
	if v, ok := m.Lookup("LoginTime"); ok {
		mb.LoginTime = int64(atoi(v)) * 1000
	}
	mb.LoggedIn = true
	q.members.set(mb.Member, mb)
	e.touchMember(q, mb.Member)
}

func (e *Engine) onQueueMemberRemoved(m ami.Message) {
	q := e.queueOf(m)
	key := memberKeyOf(m)
	if q == nil || key == "" {
		return
	}
	e.stampQueue(q, m, false, key)
	if mb, ok := q.members.get(key); ok {
		q.members.del(key)
		e.dirtyMember[memberKey{q.name, mb.Member}] = struct{}{}
	}
}

func (e *Engine) onQueueMemberPause(m ami.Message) {
	q := e.queueOf(m)
	key := memberKeyOf(m)
	if q == nil || key == "" {
		return
	}
	mb, ok := q.members.get(key)
	if !ok {
		e.onQueueMember(m)
		return
	}
	e.stampQueue(q, m, false, key)
	was := mb.Paused
	mb.Paused = strings.TrimSpace(m.Get("Paused")) == "1"
	if v, ok := m.Lookup("LastPause"); ok {
		mb.LastPause = int64(atoi(v)) * 1000
	} else if mb.Paused && !was {
		mb.LastPause = e.nowMs() // app_queue's set_queue_member_pause: a pause starts now
	}
	reason := m.Get("PausedReason")
	if reason == "" {
		reason = m.Get("Reason")
	}
	mb.PausedReason = kept(mb.PausedReason, reason)
	if !mb.Paused {
		mb.PausedReason = ""
	}
	q.members.set(key, mb)
	e.touchMember(q, key)
}

func (e *Engine) addWaiting(q *queueState, m ami.Message, since int64) {
	ch := m.Get("Channel")
	if ch == "" {
		return
	}
	old, ok := q.waiting.get(ch)
	w := QueueCaller{
		Channel:      kept(old.Channel, ch),
		Num:          kept(old.Num, m.Get("CallerIDNum")),
		Name:         kept(old.Name, m.Get("CallerIDName")),
		Position:     atoi(m.Get("Position")),
		WaitingSince: since,
	}
	if !ok {
		e.waitIn[w.Channel]++
	} else if old.WaitingSince != 0 && old.WaitingSince < since {
		w.WaitingSince = old.WaitingSince
	}
	if !known(w.Name) {
		w.Name = e.nameOf(w.Num)
	}
	q.waiting.set(w.Channel, w)
	if e.resync.active && q.listedWaiting != nil {
		q.listedWaiting[w.Channel] = true
	}
}

// unwait takes the caller on channel name out of q's waiting callers;
// those behind it move up.
func (e *Engine) unwait(q *queueState, name string) {
	if _, ok := q.waiting.m[name]; !ok {
		return
	}
	q.waiting.del(name)
	if n := e.waitIn[name] - 1; n > 0 {
		e.waitIn[name] = n
	} else {
		delete(e.waitIn, name)
	}
	e.renumber(q, "", 0)
}

// renumber gives q's waiting callers the positions app_queue gives them
// when the caller on channel joiner joined at position at, or (at 0)
// when one left: 1 to n in the order they wait, at kept for the joiner.
// app_queue moves the callers behind down in join_queue and up in
// leave_queue, and says so in no event: QueueCallerJoin and
// QueueCallerLeave carry the position of the caller who joined or left
// only, so a screen that kept the positions of the joins would show the
// second caller "#2" after the first one left. During a resync a caller
// moved counts as changed by a live event: a list item read before the
// move does not put its old position back (staleQueueItem).
func (e *Engine) renumber(q *queueState, joiner string, at int) {
	ws := e.waitScratch[:0]
	for k, w := range q.waiting.m {
		if k != joiner {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *QueueCaller) int {
		return cmp.Or(cmp.Compare(a.Position, b.Position), cmp.Compare(a.WaitingSince, b.WaitingSince), strings.Compare(a.Channel, b.Channel))
	})
	pos := 0
	for _, w := range ws {
		if pos++; pos == at {
			pos++
		}
		if w.Position == pos {
			continue
		}
		v := *w
		v.Position = pos
		q.waiting.set(v.Channel, v)
		if e.resync.active {
			if q.waitingAt == nil {
				q.waitingAt = map[string]uint64{}
			}
			q.waitingAt[v.Channel] = e.resync.events
		}
	}
	clear(ws)
	e.waitScratch = ws[:0]
}

// onQueueEntry is a QueueStatus list item: a caller waiting Wait seconds.
func (e *Engine) onQueueEntry(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	uid := m.Get("Uniqueid")
	if e.tombs.has(uid) || e.staleQueueItem(q, m, true, m.Get("Channel")) {
		return // hung up, or joined or left, while the list was in flight
	}
	e.addWaiting(q, m, e.nowMs()-int64(atoi(m.Get("Wait")))*1000)
	if c := e.chanBy(uid, m.Get("Channel")); c != nil && c.queue == "" {
		c.queue = q.name
		e.changed(c)
	}
}

func (e *Engine) onQueueCallerJoin(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	c := e.chanOf(m)
	if c == nil {
		return // it hung up already (or never existed): no ghost caller
	}
	e.updateCommon(c, m)
	c.queue = q.name
	e.stampQueue(q, m, true, m.Get("Channel"))
	e.learnQueueNumber(q, m.Get("Exten"))
	e.addWaiting(q, m, e.nowMs())
	if at := atoi(m.Get("Position")); at > 0 {
		e.renumber(q, m.Get("Channel"), at)
	}
}

// learnQueueNumber records the number a caller dialled to reach q (the
// caller's extension when it joined), so that the queue answers to both its
// app_queue name and that number. FreePBX names queues by their number, so
// there the two are one.
func (e *Engine) learnQueueNumber(q *queueState, exten string) {
	if exten == q.name || exten == q.number || !isDialString(exten) {
		return
	}
	q.number = strings.Clone(exten)
	e.dirtyQueue[q.name] = struct{}{}
}

// isDialString reports whether s is a plausible dialled number: 1-32 of
// 0-9, *, # and a leading +.
func isDialString(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '*' && c != '#' && (c != '+' || i > 0) {
			return false
		}
	}
	return true
}

func (e *Engine) onQueueCallerLeave(m ami.Message, abandon bool) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	if abandon {
		q.abandoned++
		if atoi(m.Get("HoldTime")) <= q.serviceLevel {
			q.abandonedInSL++ // app_queue's record_abandoned
		}
	}
	e.stampQueue(q, m, true, m.Get("Channel"))
	e.unwait(q, m.Get("Channel"))
	if c := e.chanBy(m.Get("Uniqueid"), m.Get("Channel")); c != nil {
		e.updateCommon(c, m)
	}
}

// onAgentCalled: a member's phone is rung for a queue caller.
func (e *Engine) onAgentCalled(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	h := readHdrs(m, dialKeys)
	src, dst := e.dialPair(&h)
	if src != nil {
		src.queue = q.name
		e.changed(src)
	}
	if dst != nil {
		dst.queue = q.name
		if src != nil {
			dst.dialledBy = src
			dst.viaTrunk = dst.viaTrunk || src.kind == ownerTrunk || src.viaTrunk
		}
		e.changed(dst)
	}
}

// runningAverage is app_queue's: (old*3 + new) / 4.
func runningAverage(old, v int) int { return (old*3 + v) / 4 }

// onAgentConnect: app_queue takes the first hold time of a queue that has
// neither completed nor abandoned a call as it is, then averages.
func (e *Engine) onAgentConnect(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	h := atoi(m.Get("HoldTime"))
	if q.completed+q.abandoned == 0 {
		q.holdTime = h
	} else {
		q.holdTime = runningAverage(q.holdTime, h)
	}
	if h <= q.serviceLevel {
		// Answered within the service level: app_queue counts it when
		// the call completes (update_queue), not now.
		if e.inSL == nil {
			e.inSL = map[string]*queueState{}
		}
		e.inSL[strings.Clone(m.Get("Uniqueid"))] = q
	}
	e.onAgentCalled(m)
}

// onAgentComplete: likewise the first completed call's talk time is taken
// as it is.
func (e *Engine) onAgentComplete(m ami.Message) {
	q := e.queueOf(m)
	if q == nil {
		return
	}
	q.completed++
	if uid := m.Get("Uniqueid"); e.inSL[uid] == q {
		q.completedInSL++
		delete(e.inSL, uid)
	}
	if t := atoi(m.Get("TalkTime")); q.completed == 1 {
		q.talkTime = t
	} else {
		q.talkTime = runningAverage(q.talkTime, t)
	}
}
