package calls

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// TestQueueNumberAlias: in queue_answered the caller dials 600 and waits in
// app_queue's "support" (queue_answered.md); the queue answers to both.
func TestQueueNumberAlias(t *testing.T) {
	rec := loadRecording(t, "queue_answered")
	e := New(testConfig(nil))
	for _, m := range rec.msgs {
		e.Apply(m)
	}
	s := e.Publish()
	for id, want := range map[string]string{"support": "support", "600": "support"} {
		if got, ok := s.QueueName(id); !ok || got != want {
			t.Errorf("QueueName(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
	for _, id := range []string{"", "601", "Support"} {
		if got, ok := s.QueueName(id); ok {
			t.Errorf("QueueName(%q) = %q, want none", id, got)
		}
	}
	if q := s.Queues.Get("support"); q.Number != "600" {
		t.Errorf("support's number = %q, want 600", q.Number)
	}
}

func TestIsDialString(t *testing.T) {
	for s, want := range map[string]bool{"600": true, "*97": true, "+39721": true, "": false, "6+0": false,
		"s": false, "60\r\n": false, "123456789012345678901234567890123": false} {
		if got := isDialString(s); got != want {
			t.Errorf("isDialString(%q) = %v", s, got)
		}
	}
}

// TestQueueNumbersConfigured: a number given in Config answers from the
// first snapshot, before any caller joined.
func TestQueueNumbersConfigured(t *testing.T) {
	rec := loadRecording(t, "queue_dynamic_members") // QueueAdd creates it, a caller joins later
	e := New(Config{Trunks: []string{"trunk"}, QueueNumbers: map[string]string{"support": "600", "other": "x"}})
	for _, m := range rec.msgs {
		if m.Event() == "QueueCallerJoin" {
			break
		}
		e.Apply(m)
	}
	s := e.Publish()
	if _, ok := s.Queues.Lookup("support"); !ok {
		t.Fatal("no queue support before the caller joined")
	}
	if name, ok := s.QueueName("600"); !ok || name != "support" {
		t.Errorf("QueueName(600) = %q, %v before any caller joined", name, ok)
	}
}

// heldQueues is what a snapshot showed of its queues when it was
// published, copied: values (members and waiting callers cloned), JSON in
// both classes, names, the collection.
type heldQueues struct {
	s     *Snapshot
	at    int
	keys  []string
	v     map[string]Queue
	json  map[string][2]string
	whole string
}

func holdQueues(s *Snapshot, at int) heldQueues {
	h := heldQueues{s: s, at: at, keys: s.Queues.Keys(), v: map[string]Queue{}, json: map[string][2]string{}, whole: string(s.QueuesJSON())}
	for k, q := range s.Queues.All() {
		q.Members, q.WaitingCallers = deepClone(q.Members), deepClone(q.WaitingCallers)
		h.v[k] = q
		h.json[k] = [2]string{string(s.QueueJSON(k)), string(s.QueueJSONAs(k, NumbersHidden))}
	}
	return h
}

// deepClone copies m and the values it points to.
func deepClone[V any](m map[string]*V) map[string]*V {
	c := make(map[string]*V, len(m))
	for k, p := range m {
		v := *p
		c[k] = &v
	}
	return c
}

// check fails unless the snapshot shows what it showed when held.
func (h heldQueues) check(t *testing.T, now int) {
	t.Helper()
	s := h.s
	if keys := s.Queues.Keys(); !slices.Equal(keys, h.keys) || s.Queues.Len() != len(h.keys) {
		t.Fatalf("event %d: the snapshot of event %d has queues %v, had %v", now, h.at, keys, h.keys)
	}
	for k, was := range h.v {
		q, ok := s.Queues.Lookup(k)
		if !ok || !queueEqual(&q, &was) || q.pieces != was.pieces {
			t.Fatalf("event %d: the snapshot of event %d: queue %s is\n%+v\nwas\n%+v", now, h.at, k, q, was)
		}
		if got := [2]string{string(s.QueueJSON(k)), string(s.QueueJSONAs(k, NumbersHidden))}; got != h.json[k] {
			t.Fatalf("event %d: the snapshot of event %d: queue %s's JSON is\n%s\nwas\n%s", now, h.at, k, got, h.json[k])
		}
	}
	if got := string(s.QueuesJSON()); got != h.whole {
		t.Fatalf("event %d: the snapshot of event %d: queues\n%s\nwere\n%s", now, h.at, got, h.whole)
	}
}

// TestQueueSnapshotsKept runs the call centre's mix in batches of random
// size, a queue added on the way, and checks after every Publish that
// the snapshot shows each queue as the engine holds it (its members and
// waiting callers as they are, none stale), and that the snapshots held
// since, shared with readers, show what they showed when published:
// their queues, members and JSON are never written after.
func TestQueueSnapshotsKept(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	r := rand.New(rand.NewPCG(3, 17))
	var held []heldQueues
	pubs := 0
	inBatches(e, m.stream(8000), r, func(i, _ int) {
		if pubs == 40 {
			e.Apply(ev("QueueMember", "Queue", "late", "Name", "Late", "Location", "PJSIP/2001", "StateInterface", "PJSIP/2001",
				"Membership", "dynamic", "CallsTaken", "0", "LastCall", "0", "Paused", "0", "PausedReason", ""))
		}
		s := e.Publish()
		pubs++
		checkQueues(t, e, "event "+strconv.Itoa(i))
		for k, q := range s.Queues.All() {
			if x := e.pub.queue.ents[k]; x == nil || !queueEqual(&q, &x.v) {
				t.Fatalf("event %d: the snapshot's queue %s is not the one published", i, k)
			}
		}
		for _, h := range held {
			h.check(t, i)
		}
		if pubs%5 == 0 {
			held = append(held, holdQueues(s, i))
		}
	})
	if len(held) < 10 || held[0].s.Queues.Len()+1 != e.Snapshot().Queues.Len() {
		t.Fatalf("%d snapshots held, the first with %d queues, the last %d: want a queue added", len(held), held[0].s.Queues.Len(), e.Snapshot().Queues.Len())
	}
}

// TestWaitingRenumbered: app_queue renumbers the callers behind one who
// joins ahead of them (a caller of higher priority: join_queue) or who
// leaves (leave_queue), and says so in no event: QueueCallerJoin and
// QueueCallerLeave carry the position of the one who joined or left. The
// positions below are app_queue's after each step, written from its
// join_queue and leave_queue: 1 to n in the order the callers wait.
func TestWaitingRenumbered(t *testing.T) {
	e := New(testConfig(nil))
	for _, x := range []string{"1", "2", "3", "4"} {
		e.Apply(waitNewchannel(x))
	}
	join := func(x, pos, count string) { e.Apply(waitJoin(x, pos, count)) }
	leave := func(x, pos, count string) { e.Apply(waitLeave(x, pos, count)) }
	check := func(step string, want map[string]int) {
		t.Helper()
		if got := positions(e.Publish()); !maps.Equal(got, want) {
			t.Errorf("%s: positions %v, want %v", step, got, want)
		}
	}
	join("1", "1", "1")
	join("2", "2", "2")
	join("3", "3", "3")
	check("three joined", map[string]int{"1": 1, "2": 2, "3": 3})
	leave("1", "1", "2")
	check("the first left", map[string]int{"2": 1, "3": 2})
	join("4", "1", "3") // of higher priority: ahead of the others
	check("one joined ahead", map[string]int{"4": 1, "2": 2, "3": 3})
	leave("2", "2", "2")
	check("the second left", map[string]int{"4": 1, "3": 2})
	e.Apply(ev("Hangup", "Channel", waitChan("4"), "Uniqueid", "1.4", "Linkedid", "1.4", "Cause", "16"))
	check("the first hung up", map[string]int{"3": 1})
}

// TestWaitingRenumberedDuringResync: the first of three waiting callers
// leaves while a resync runs, after QueueStatus was answered but before
// its items are applied: the items name the other two at their old
// positions (2 and 3), which must not come back over the ones the leave
// gave them (1 and 2).
func TestWaitingRenumberedDuringResync(t *testing.T) {
	msgs := []ami.Message{waitNewchannel("1"), waitNewchannel("2"), waitNewchannel("3"),
		waitJoin("1", "1", "1"), waitJoin("2", "2", "2"), waitJoin("3", "3", "3")}
	model := amitest.NewModel()
	model.Configure(msgs)
	for _, m := range msgs {
		model.Apply(m)
	}
	lists := model.Lists() // taken before the leave
	e := New(testConfig(nil))
	e.SetLink(LinkLive)
	for _, m := range msgs {
		e.Apply(m)
	}
	e.Publish()
	e.BeginResync()
	e.Apply(waitLeave("1", "1", "2"))
	for _, l := range lists {
		for _, m := range l {
			e.Apply(m)
		}
	}
	e.Publish()
	e.EndResync()
	if got, want := positions(e.Publish()), map[string]int{"2": 1, "3": 2}; !maps.Equal(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
}

// The waiting callers of TestWaitingRenumbered: trunk channels that dial
// the queue's number.
func waitChan(x string) string { return "PJSIP/trunk-0000000" + x }

func waitNewchannel(x string) ami.Message {
	return ev("Newchannel", "Channel", waitChan(x), "ChannelState", "6", "ChannelStateDesc", "Up", "CallerIDNum", "06123456"+x,
		"Uniqueid", "1."+x, "Linkedid", "1."+x, "Context", "from-trunk", "Exten", "600", "Priority", "1")
}

func waitJoin(x, pos, count string) ami.Message {
	return ev("QueueCallerJoin", "Channel", waitChan(x), "Uniqueid", "1."+x, "Linkedid", "1."+x, "CallerIDNum", "06123456"+x,
		"Queue", "support", "Position", pos, "Count", count)
}

func waitLeave(x, pos, count string) ami.Message {
	return ev("QueueCallerLeave", "Channel", waitChan(x), "Uniqueid", "1."+x, "Linkedid", "1."+x, "Queue", "support", "Position", pos, "Count", count)
}

// positions are a snapshot's callers waiting in support by the last digit
// of their channel, with their positions.
func positions(s *Snapshot) map[string]int {
	got := map[string]int{}
	for k, w := range s.Queues.Get("support").WaitingCallers {
		got[strings.TrimPrefix(k, "PJSIP/trunk-0000000")] = w.Position
	}
	return got
}

// TestServiceLevel: a queue's service level as app_queue keeps it. Its
// QueueStatus gives the seconds and the percentages (ServicelevelPerf:
// completed calls answered within the level over all completed,
// ServicelevelPerf2: those and the calls abandoned within it over all
// completed and abandoned); then a call counts as answered within the
// level when its AgentConnect's HoldTime is at most the level, counted
// when it completes (update_queue, at AgentComplete), and an abandoned
// call when its QueueCallerAbandon's HoldTime is (record_abandoned).
func TestServiceLevel(t *testing.T) {
	e := New(testConfig(nil))
	e.Apply(waitNewchannel("5"))
	e.Apply(ev("QueueParams", "Queue", "support", "Max", "0", "Strategy", "ringall", "Calls", "0", "Holdtime", "10", "TalkTime", "60",
		"Completed", "4", "Abandoned", "1", "ServiceLevel", "20", "ServicelevelPerf", "75.0", "ServicelevelPerf2", "80.0", "Weight", "0"))
	check := func(step string, completed, inSL, abandoned, abandonedInSL int) {
		t.Helper()
		q := e.Publish().Queues.Get("support")
		if q.ServiceLevel != 20 || q.Completed != completed || q.CompletedInSL != inSL || q.Abandoned != abandoned || q.AbandonedInSL != abandonedInSL {
			t.Errorf("%s: level %d, completed %d (%d within), abandoned %d (%d within); want 20, %d (%d), %d (%d)", step,
				q.ServiceLevel, q.Completed, q.CompletedInSL, q.Abandoned, q.AbandonedInSL, completed, inSL, abandoned, abandonedInSL)
		}
	}
	check("listed", 4, 3, 1, 1) // 75 % of 4; 80 % of 5, less the 3
	agent := func(event, uid, hold string) {
		e.Apply(ev(event, "Queue", "support", "Channel", "PJSIP/trunk-"+uid, "Uniqueid", uid, "DestChannel", "PJSIP/203-1", "DestUniqueid", uid+"0",
			"MemberName", "Carol", "Interface", "PJSIP/203", "HoldTime", hold, "TalkTime", "30", "RingTime", "2"))
	}
	agent("AgentConnect", "1.1", "5")
	check("answered within the level, not completed yet", 4, 3, 1, 1)
	agent("AgentComplete", "1.1", "5")
	check("completed within the level", 5, 4, 1, 1)
	agent("AgentConnect", "1.2", "25")
	agent("AgentComplete", "1.2", "25")
	check("completed beyond the level", 6, 4, 1, 1)
	abandon := func(uid, hold string) {
		e.Apply(ev("QueueCallerAbandon", "Queue", "support", "Channel", "PJSIP/trunk-"+uid, "Uniqueid", uid, "Position", "1",
			"OriginalPosition", "1", "HoldTime", hold))
	}
	abandon("1.3", "20") // at most the level: within
	check("abandoned within the level", 6, 4, 2, 2)
	abandon("1.4", "21")
	check("abandoned beyond the level", 6, 4, 3, 2)
	agent("AgentConnect", "1.5", "0")
	e.Apply(ev("Hangup", "Channel", waitChan("5"), "Uniqueid", "1.5", "Linkedid", "1.5", "Cause", "16"))
	check("answered, gone without completing", 6, 4, 3, 2)
	if len(e.inSL) != 0 {
		t.Errorf("%d calls still awaiting completion, want none", len(e.inSL))
	}
}

// TestServiceLevelRecorded: in queue_answered the queue's service level is
// 0 (QUEUESRVLEVEL 0, QUEUESRVLEVELPERF 0.0 in its VarSets) and Carol
// answers after 3 s: one call completed, none within the level.
func TestServiceLevelRecorded(t *testing.T) {
	e := New(testConfig(nil))
	for _, m := range loadRecording(t, "queue_answered").msgs {
		e.Apply(m)
	}
	q := e.Publish().Queues.Get("support")
	if q.Completed != 1 || q.CompletedInSL != 0 || q.ServiceLevel != 0 || q.AbandonedInSL != 0 {
		t.Errorf("completed %d (%d within a level of %d s), %d abandoned within; want 1 (0 within 0 s), 0", q.Completed, q.CompletedInSL, q.ServiceLevel, q.AbandonedInSL)
	}
}

// TestMemberLastPause: in queue_dynamic_members (its .md: QueuePause
// PJSIP/201 with reason lunch, then unpaused) the QueueMemberPause of the
// pause carries LastPause 1796111404, and so does the unpause's: 201 is
// paused since then, then not paused, its latest pause still having begun
// then (app_queue's lastpause changes only when a pause starts). An
// event without LastPause (an older Asterisk) starts the pause at the
// bridge's clock.
func TestMemberLastPause(t *testing.T) {
	msgs := loadRecording(t, "queue_dynamic_members").msgs
	e := New(testConfig(nil))
	pauses := 0
	for _, m := range msgs {
		e.Apply(m)
		if m.Event() != "QueueMemberPause" {
			continue
		}
		pauses++
		mb := e.Publish().Queues.Get("support").Members["201"]
		if mb == nil {
			t.Fatal("no member 201 at its pause")
		}
		if want := pauses == 1; mb.Paused != want || mb.LastPause != 1796111404000 {
			t.Errorf("pause event %d: paused %v since %d, want %v since 1796111404000", pauses, mb.Paused, mb.LastPause, want)
		}
	}
	if pauses != 2 {
		t.Fatalf("%d QueueMemberPause events, want the pause and the unpause", pauses)
	}

	now := time.Unix(1796028439, 0)
	e = New(Config{Now: func() time.Time { return now }})
	e.Apply(ev("QueueMember", "Queue", "support", "Name", "Alice", "Location", "PJSIP/201", "StateInterface", "PJSIP/201",
		"Membership", "dynamic", "Paused", "0"))
	e.Apply(ev("QueueMemberPause", "Queue", "support", "MemberName", "Alice", "Interface", "PJSIP/201", "Paused", "1", "PausedReason", "break"))
	if mb := e.Publish().Queues.Get("support").Members["201"]; !mb.Paused || mb.LastPause != now.UnixMilli() {
		t.Errorf("paused %v since %d, want since %d", mb.Paused, mb.LastPause, now.UnixMilli())
	}
}

// TestMemberLoginTime: in queue_dynamic_members Alice (201) joins with
// QueueAdd (QueueMemberAdded LoginTime 1796111404) and the static 203 and
// 204 are listed by QueueStatus with the queue's load time (LoginTime
// 1796111254).
func TestMemberLoginTime(t *testing.T) {
	e := New(testConfig(nil))
	for _, m := range loadRecording(t, "queue_dynamic_members").msgs {
		if m.Event() == "QueueMemberRemoved" {
			break // 201 leaves at the end
		}
		e.Apply(m)
		if m.Event() != "QueueStatusComplete" {
			continue
		}
		ms := e.Publish().Queues.Get("support").Members
		for x, want := range map[string]int64{"201": 1796111404000, "203": 1796111254000, "204": 1796111254000} {
			if mb := ms[x]; mb != nil && mb.LoginTime != want {
				t.Errorf("%s logged in at %d, want %d", x, mb.LoginTime, want)
			}
		}
	}
	ms := e.Publish().Queues.Get("support").Members
	if ms["201"] == nil || ms["203"] == nil || ms["201"].LoginTime != 1796111404000 || ms["203"].LoginTime != 1796111254000 {
		t.Errorf("members %v, want 201 in since 1796111404000 and 203 since 1796111254000", ms)
	}
}
