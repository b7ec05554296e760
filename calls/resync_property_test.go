package calls

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// pbxModel is what Asterisk would answer to the resync's list actions at
// one point of a recorded stream. It is built from the events alone, with
// none of the engine's code: each channel's last snapshot headers, its
// bridge and its application; the last ExtensionStatus of each hint and
// DeviceStateChange of each device; the parked calls; each queue's
// members and waiting callers.
type pbxModel struct {
	chans  map[string]*modelChan
	order  []string // Uniqueids in creation order
	exts   map[string]ami.Message
	extOrd []string
	devs   map[string]ami.Message
	devOrd []string
	parked map[string]ami.Message // by ParkeeUniqueid
	parkOr []string
	queues []string
	member map[string]map[string]string // by queue "|" interface: QueueMember item headers
	memOrd []string
	wait   map[string]ami.Message // by queue "|" channel: the QueueCallerJoin
	waitOr []string
}

// queueMemberKeys are the headers of a QueueMember item, and where a live
// member event keeps them (key in the item, key in the event).
var queueMemberKeys = [][2]string{{"Queue", "Queue"}, {"Name", "MemberName"}, {"Location", "Interface"},
	{"StateInterface", "StateInterface"}, {"Membership", "Membership"}, {"Penalty", "Penalty"},
	{"CallsTaken", "CallsTaken"}, {"LastCall", "LastCall"}, {"Status", "Status"}, {"Paused", "Paused"},
	{"PausedReason", "PausedReason"}}

// configure learns the PBX's configuration from a whole recording: the
// queues exist (and QueueStatus lists them) before anybody joins one.
func (p *pbxModel) configure(msgs []ami.Message) {
	for _, m := range msgs {
		if m.Event() != "" && m.Event() != "QueueSummary" {
			p.queueSeen(m.Get("Queue"))
		}
	}
}

func (p *pbxModel) queueSeen(q string) {
	if q != "" && !slices.Contains(p.queues, q) {
		p.queues = append(p.queues, q)
	}
}

// member updates a queue member from a live event or from one of the
// recording's own QueueMember items (item true).
func (p *pbxModel) memberEvent(m ami.Message, item bool) {
	iface := m.Get("StateInterface")
	if iface == "" {
		iface = m.Get("Interface")
	}
	if iface == "" {
		iface = m.Get("Location")
	}
	k := m.Get("Queue") + "|" + iface
	p.queueSeen(m.Get("Queue"))
	mb := p.member[k]
	if mb == nil {
		mb = map[string]string{}
		p.member[k] = mb
		p.memOrd = append(p.memOrd, k)
	}
	for _, kv := range queueMemberKeys {
		src := kv[1]
		if item {
			src = kv[0]
		}
		if v, ok := m.Lookup(src); ok {
			mb[kv[0]] = v
		}
	}
}

type modelChan struct {
	hdr    map[string]string
	bridge string
	app    string
}

// snapshotKeys are the channel snapshot headers every channel event
// carries (with a prefix such as "Dest" for the second channel).
var snapshotKeys = []string{"Channel", "ChannelState", "ChannelStateDesc", "CallerIDNum", "CallerIDName",
	"ConnectedLineNum", "ConnectedLineName", "Context", "Exten", "Priority", "Uniqueid", "Linkedid"}

func newPBXModel() *pbxModel {
	return &pbxModel{chans: map[string]*modelChan{}, exts: map[string]ami.Message{}, devs: map[string]ami.Message{}, parked: map[string]ami.Message{},
		member: map[string]map[string]string{}, wait: map[string]ami.Message{}}
}

// update refreshes the channel whose snapshot m carries under prefix.
func (p *pbxModel) update(m ami.Message, prefix string) *modelChan {
	uid := m.Get(prefix + "Uniqueid")
	c := p.chans[uid]
	if c == nil {
		return nil
	}
	if _, ok := m.Lookup(prefix + "ChannelState"); !ok {
		return c
	}
	for _, k := range snapshotKeys {
		if v, ok := m.Lookup(prefix + k); ok {
			c.hdr[k] = v
		}
	}
	return c
}

func (p *pbxModel) apply(m ami.Message) {
	if m.Kind() != ami.KindEvent {
		return
	}
	if m.ActionID() != "" {
		// The recording's own list answers describe, not change; queue
		// members are known only from them when nobody paused them.
		if m.Event() == "QueueMember" {
			p.memberEvent(m, true)
		}
		return
	}
	switch ev := m.Event(); ev {
	case "Newchannel":
		uid := m.Get("Uniqueid")
		if uid == "" || p.chans[uid] != nil {
			return
		}
		p.chans[uid] = &modelChan{hdr: map[string]string{}}
		p.order = append(p.order, uid)
		p.update(m, "")
	case "Hangup":
		delete(p.chans, m.Get("Uniqueid"))
	case "BridgeEnter":
		if c := p.update(m, ""); c != nil {
			c.bridge = m.Get("BridgeUniqueid")
		}
	case "BridgeLeave":
		if c := p.update(m, ""); c != nil && c.bridge == m.Get("BridgeUniqueid") {
			c.bridge = ""
		}
	case "DialBegin", "DialState", "DialEnd":
		src, dst := p.update(m, ""), p.update(m, "Dest")
		if ev == "DialBegin" {
			if src != nil && src.app == "" {
				src.app = "Dial"
			}
			if dst != nil && dst.app == "" {
				dst.app = "AppDial"
			}
		}
	case "AgentCalled":
		if c := p.update(m, "Dest"); c != nil {
			c.app = "AppQueue"
		}
	case "QueueCallerJoin":
		if c := p.update(m, ""); c != nil {
			c.app = "Queue"
		}
		k := m.Get("Queue") + "|" + m.Get("Channel")
		p.queueSeen(m.Get("Queue"))
		if _, ok := p.wait[k]; !ok {
			p.waitOr = append(p.waitOr, k)
		}
		p.wait[k] = m
	case "QueueCallerLeave", "QueueCallerAbandon":
		p.update(m, "")
		delete(p.wait, m.Get("Queue")+"|"+m.Get("Channel"))
	case "QueueMemberAdded", "QueueMemberStatus", "QueueMemberPause":
		p.memberEvent(m, false)
	case "QueueMemberRemoved":
		iface := m.Get("StateInterface")
		if iface == "" {
			iface = m.Get("Interface")
		}
		delete(p.member, m.Get("Queue")+"|"+iface)
	case "ExtensionStatus":
		k := m.Get("Exten") + "@" + m.Get("Context")
		if _, ok := p.exts[k]; !ok {
			p.extOrd = append(p.extOrd, k)
		}
		p.exts[k] = m
	case "DeviceStateChange":
		k := m.Get("Device")
		if _, ok := p.devs[k]; !ok {
			p.devOrd = append(p.devOrd, k)
		}
		p.devs[k] = m
	case "ParkedCall":
		k := m.Get("ParkeeUniqueid")
		if _, ok := p.parked[k]; !ok {
			p.parkOr = append(p.parkOr, k)
		}
		p.parked[k] = m
	case "UnParkedCall", "ParkedCallGiveUp", "ParkedCallTimeOut":
		delete(p.parked, m.Get("ParkeeUniqueid"))
	default:
		p.update(m, "")
	}
}

// lists answers the resync's list actions from the model: the items of
// CoreShowChannels, ExtensionStateList, DeviceStateList, ParkedCalls and
// QueueStatus,
// each with its action's ActionID, completing events included.
func (p *pbxModel) lists() [][]ami.Message {
	item := func(ev, id string, kv ...string) ami.Message {
		m := ami.NewMessage(ami.Header{Key: "Event", Value: ev}, ami.Header{Key: "ActionID", Value: id})
		for i := 0; i+1 < len(kv); i += 2 {
			m = m.Add(kv[i], kv[i+1])
		}
		return m
	}
	relabel := func(m ami.Message, id string) ami.Message { return m.Set("ActionID", id) }
	var chans, exts, devs, parks []ami.Message
	for _, uid := range p.order {
		c := p.chans[uid]
		if c == nil {
			continue
		}
		var kv []string
		for _, k := range snapshotKeys {
			kv = append(kv, k, c.hdr[k])
		}
		kv = append(kv, "Application", c.app, "Duration", "00:00:01", "BridgeId", c.bridge)
		chans = append(chans, item("CoreShowChannel", "csc", kv...))
	}
	chans = append(chans, item("CoreShowChannelsComplete", "csc", "EventList", "Complete"))
	for _, k := range p.extOrd {
		exts = append(exts, relabel(p.exts[k], "esl"))
	}
	exts = append(exts, item("ExtensionStateListComplete", "esl", "EventList", "Complete"))
	for _, k := range p.devOrd {
		devs = append(devs, relabel(p.devs[k], "dsl"))
	}
	devs = append(devs, item("DeviceStateListComplete", "dsl", "EventList", "Complete"))
	for _, k := range p.parkOr {
		if m, ok := p.parked[k]; ok {
			parks = append(parks, relabel(m, "pc"))
		}
	}
	parks = append(parks, item("ParkedCallsComplete", "pc", "EventList", "Complete"))
	var queues []ami.Message
	for _, q := range p.queues {
		queues = append(queues, item("QueueParams", "qs", "Queue", q))
		for _, k := range p.memOrd {
			if mb := p.member[k]; mb != nil && mb["Queue"] == q {
				var kv []string
				for _, h := range queueMemberKeys {
					kv = append(kv, h[0], mb[h[0]])
				}
				queues = append(queues, item("QueueMember", "qs", kv...))
			}
		}
		pos := 0
		for _, k := range p.waitOr {
			if w, ok := p.wait[k]; ok && w.Get("Queue") == q {
				pos++
				queues = append(queues, item("QueueEntry", "qs", "Queue", q, "Position", fmt.Sprint(pos), "Channel", w.Get("Channel"),
					"Uniqueid", w.Get("Uniqueid"), "CallerIDNum", w.Get("CallerIDNum"), "CallerIDName", w.Get("CallerIDName"), "Wait", "0"))
			}
		}
	}
	queues = append(queues, item("QueueStatusComplete", "qs", "EventList", "Complete"))
	return [][]ami.Message{chans, exts, devs, parks, queues}
}

// stateOf is the part of a snapshot a resync must get right, as text:
// every conversation (times aside: a list knows a call's age only to the
// second), extension and trunk statuses, queue members and waiting
// callers, parked calls.
func stateOf(s *Snapshot) string {
	var lines []string
	conv := func(owner string, cs map[string]Conversation) {
		for id, c := range cs {
			lines = append(lines, fmt.Sprintf("conv %s %s connected=%v dir=%s with=%s/%s uid=%s linked=%s rec=%s conf=%v queue=%v/%s trunk=%v",
				owner, id, c.Connected, c.Direction, c.CounterpartNum, c.CounterpartName, c.UniqueID, c.LinkedID,
				c.Recording, c.InConference, c.ThroughQueue, c.QueueID, c.ThroughTrunk))
		}
	}
	for k, x := range s.Extensions {
		// An extension the engine never heard of and an idle one are the
		// same to a user (the model lists only hints it saw change).
		if x.Status != "online" || len(x.Conversations) > 0 {
			lines = append(lines, fmt.Sprintf("ext %s %s", k, x.Status))
		}
		conv(k, x.Conversations)
	}
	for k, x := range s.Trunks {
		conv(k, x.Conversations)
	}
	for k, q := range s.Queues {
		for ch := range q.WaitingCallers {
			lines = append(lines, fmt.Sprintf("waiting %s %s", k, ch))
		}
		for id, mb := range q.Members {
			lines = append(lines, fmt.Sprintf("member %s %s name=%s type=%s paused=%v/%s taken=%d", k, id, mb.Name, mb.Type, mb.Paused, mb.PausedReason, mb.CallsTaken))
		}
	}
	for k, p := range s.Parkings {
		if p.ParkedCaller != nil {
			lines = append(lines, fmt.Sprintf("parked %s %s", k, p.ParkedCaller.Channel))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// resyncCase is one way a resync can meet the live stream: the engine has
// applied msgs[:k] when the resync starts; the lists describe the PBX
// after msgs[:j] (j >= k: they are asked for after the resync starts);
// the live events msgs[j:] arrive with before of them ahead of the first
// list item, inside of them mixed among the items, the rest after
// EndResync.
//
// With gap > 0 the link was down before the resync: msgs[k-gap:k] were
// never seen (the reconnect case).
//
// With early > 0 the link applied the list items before the last early
// live events older than the lists: Run's select may take a finished
// resync before a batch the client had already read.
type resyncCase struct {
	k, j, before, inside int
	gap, early           int
	seed                 uint64
}

func (rc resyncCase) String() string {
	return fmt.Sprintf("k=%d j=%d before=%d inside=%d gap=%d early=%d seed=%d", rc.k, rc.j, rc.before, rc.inside, rc.gap, rc.early, rc.seed)
}

// run plays the case and returns the final state.
func (rc resyncCase) run(msgs []ami.Message, lists [][]ami.Message) string {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028440, 0)}).Now))
	e.SetLink(LinkLive)
	for _, m := range msgs[:rc.k-rc.gap] {
		e.Apply(m)
	}
	e.Publish()
	if rc.gap > 0 {
		e.SetLink(LinkDown)
		e.Publish()
	}
	e.BeginResync()
	live := msgs[rc.k:]
	apply := func(ms []ami.Message) {
		for _, m := range ms {
			e.Apply(m)
		}
	}
	apply(live[:rc.j-rc.k-rc.early])
	live = live[rc.j-rc.k-rc.early:]
	apply(live[:rc.before])
	live = live[rc.before:]
	// The lists, in any order of lists, with live events mixed in.
	r := rand.New(rand.NewPCG(rc.seed, 11))
	var items []ami.Message
	for _, i := range r.Perm(len(lists)) {
		items = append(items, lists[i]...)
	}
	mixed := live[:rc.inside]
	live = live[rc.inside:]
	for len(items) > 0 || len(mixed) > 0 {
		if len(mixed) > 0 && (len(items) == 0 || r.IntN(2) == 0) {
			e.Apply(mixed[0])
			mixed = mixed[1:]
			continue
		}
		e.Apply(items[0])
		items = items[1:]
	}
	e.Publish()
	e.EndResync()
	e.Publish()
	apply(live)
	return stateOf(e.Publish())
}

// TestResyncInterleavingProperty: for every message boundary k of every
// recording, a resync started there, whose lists describe the PBX at some
// later point j and meet the live events that follow j before, among and
// after their items, ends in the same state as the events alone. -short
// samples the boundaries.
func TestResyncInterleavingProperty(t *testing.T) {
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msgs := loadRecording(t, name).msgs
			n := len(msgs)
			truth := New(testConfig((&fakeClock{t: time.Unix(1796028440, 0)}).Now))
			truth.SetLink(LinkLive)
			for _, m := range msgs {
				truth.Apply(m)
			}
			want := stateOf(truth.Publish())

			// The lists at every point j.
			model := newPBXModel()
			model.configure(msgs)
			lists := make([][][]ami.Message, n+1)
			lists[0] = model.lists()
			for j, m := range msgs {
				model.apply(m)
				lists[j+1] = model.lists()
			}

			step := 1
			if testing.Short() {
				step = max(1, n/40)
			}
			r := rand.New(rand.NewPCG(uint64(n), 3))
			failures := 0
			for k := 0; k <= n; k += step {
				cases := []resyncCase{{k: k, j: k}} // lists at once, live events after them
				for i := range 2 {
					j := k + r.IntN(min(n-k, 40)+1)
					rest := n - j
					before := r.IntN(min(rest, 20) + 1)
					inside := r.IntN(min(rest-before, 20) + 1)
					rc := resyncCase{k: k, j: j, before: before, inside: inside, seed: r.Uint64()}
					if i == 1 && j > k {
						rc.early, rc.before = 1+r.IntN(min(j-k, 10)), 0
					}
					cases = append(cases, rc)
				}
				if k > 0 { // a first connect: calls already up, lists at once
					before := r.IntN(min(n-k, 20) + 1)
					cases = append(cases, resyncCase{k: k, j: k, before: before, gap: k, seed: r.Uint64()})
				}
				if k > 0 { // a reconnect: the link was down for a while
					gap := 1 + r.IntN(min(k, 60))
					j := k + r.IntN(min(n-k, 40)+1)
					before := r.IntN(min(n-j, 20) + 1)
					cases = append(cases, resyncCase{k: k, j: j, before: before, inside: r.IntN(min(n-j-before, 20) + 1), gap: gap, seed: r.Uint64()})
				}
				for _, rc := range cases {
					if got := rc.run(msgs, lists[rc.j]); got != want {
						failures++
						if failures <= 3 {
							t.Errorf("%s: %s", rc, diffLines(want, got))
						}
					}
				}
			}
			if failures > 3 {
				t.Errorf("%d failing cases in all", failures)
			}
		})
	}
}

// diffLines lists the lines only in want (-) or only in got (+).
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return "\n" + strings.Join(out, "\n")
}

// TestResyncKeepsEventsOfUnlistedChannel: after a reconnect, a call set up
// while the link was down is bridged right after CoreShowChannels was
// taken; its BridgeEnter events are applied before the list items (the two
// paths lose their order). The call must still end up connected, not as
// two half conversations (the "58 of 60 connected" of issue 19).
func TestResyncKeepsEventsOfUnlistedChannel(t *testing.T) {
	msgs := loadRecording(t, "basic_call_caller_hangup").msgs
	var enters []int
	for i, m := range msgs {
		if m.Event() == "BridgeEnter" {
			enters = append(enters, i)
		}
	}
	if len(enters) < 2 {
		t.Fatal("no bridged call in the recording")
	}
	msgs = msgs[:enters[1]+1]
	model := newPBXModel()
	for _, m := range msgs[:enters[0]] {
		model.apply(m)
	}
	want := "conv 201 PJSIP/201-00000000>PJSIP/202-00000001 connected=true dir=out with=202/Bob"
	rc := resyncCase{k: enters[0], j: enters[0], before: len(msgs) - enters[0], gap: enters[0]}
	got := rc.run(msgs, model.lists())
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant a line starting\n%s", got, want)
	}
}

// TestResyncKeepsQueueCallerJoinedMeanwhile: a caller joins a queue after
// QueueStatus was answered but before its items are applied: the list
// does not name her, and she must stay waiting. Then she leaves before a
// second resync's (older) list naming her is applied: she must not come
// back.
func TestResyncKeepsQueueCallerJoinedMeanwhile(t *testing.T) {
	msgs := loadRecording(t, "queue_answered").msgs
	join, leave := -1, -1
	for i, m := range msgs {
		switch m.Event() {
		case "QueueCallerJoin":
			join = i
		case "QueueCallerLeave":
			leave = i
		}
	}
	if join < 0 || leave < join {
		t.Fatal("no queue caller in the recording")
	}
	waiting := func(s string) bool { return strings.Contains(s, "waiting support PJSIP/trunk-") }
	model := newPBXModel()
	model.configure(msgs)
	for _, m := range msgs[:join] {
		model.apply(m)
	}
	// Lists taken just before the join; the join applied before them.
	rc := resyncCase{k: join, j: join, before: 1}
	if got := rc.run(msgs[:join+1], model.lists()); !waiting(got) {
		t.Errorf("caller who joined during the resync dropped:\n%s", got)
	}
	for _, m := range msgs[join:leave] {
		model.apply(m)
	}
	// Lists taken just before she leaves; the leave applied before them.
	rc = resyncCase{k: leave, j: leave, before: 1}
	if got := rc.run(msgs[:leave+1], model.lists()); waiting(got) {
		t.Errorf("caller who left during the resync is back:\n%s", got)
	}
}

// TestResyncDoesNotReparkRetrievedCall: a parked call is retrieved after
// ParkedCalls was answered but before its items are applied: the list
// still names it, and it must not show as parked again.
func TestResyncDoesNotReparkRetrievedCall(t *testing.T) {
	msgs := loadRecording(t, "park_retrieve").msgs
	unpark := -1
	for i, m := range msgs {
		if m.Event() == "UnParkedCall" {
			unpark = i
		}
	}
	if unpark < 0 {
		t.Fatal("no retrieved call in the recording")
	}
	model := newPBXModel()
	model.configure(msgs)
	for _, m := range msgs[:unpark] {
		model.apply(m)
	}
	rc := resyncCase{k: unpark, j: unpark, before: 1}
	if got := rc.run(msgs[:unpark+1], model.lists()); strings.Contains(got, "parked ") {
		t.Errorf("retrieved call parked again:\n%s", got)
	}
}
