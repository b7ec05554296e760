package amitest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ctibridge/ctibridge/ami"
)

// Model is what Asterisk would answer to a resync's list actions at one
// point of a stream, built from the events alone (with none of the
// engine's code), for tests that need list answers at any point of a
// recording: each channel's last snapshot headers, its
// bridge and its application; the last ExtensionStatus of each hint and
// DeviceStateChange of each device; the parked calls; each queue's
// members and waiting callers.
type Model struct {
	mu     sync.Mutex
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

// Configure learns the PBX's configuration from a whole recording: the
// queues exist (and QueueStatus lists them) before anybody joins one.
func (p *Model) Configure(msgs []ami.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		if m.Event() != "" && m.Event() != ami.EventQueueSummary {
			p.queueSeen(m.Get("Queue"))
		}
	}
}

func (p *Model) queueSeen(q string) {
	if q != "" && !slices.Contains(p.queues, q) {
		p.queues = append(p.queues, q)
	}
}

// member updates a queue member from a live event or from one of the
// recording's own QueueMember items (item true).
func (p *Model) memberEvent(m ami.Message, item bool) {
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

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{chans: map[string]*modelChan{}, exts: map[string]ami.Message{}, devs: map[string]ami.Message{}, parked: map[string]ami.Message{},
		member: map[string]map[string]string{}, wait: map[string]ami.Message{}}
}

// update refreshes the channel whose snapshot m carries under prefix.
func (p *Model) update(m ami.Message, prefix string) *modelChan {
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

// Apply updates the model with one message of the stream.
func (p *Model) Apply(m ami.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.Kind() != ami.KindEvent {
		return
	}
	if m.ActionID() != "" {
		// The recording's own list answers describe, not change; queue
		// members are known only from them when nobody paused them.
		if m.Event() == ami.EventQueueMember {
			p.memberEvent(m, true)
		}
		return
	}
	switch ev := m.Event(); ev {
	case ami.EventNewchannel:
		uid := m.Get("Uniqueid")
		if uid == "" || p.chans[uid] != nil {
			return
		}
		p.chans[uid] = &modelChan{hdr: map[string]string{}}
		p.order = append(p.order, uid)
		p.update(m, "")
	case ami.EventHangup:
		delete(p.chans, m.Get("Uniqueid"))
	case ami.EventBridgeEnter:
		if c := p.update(m, ""); c != nil {
			c.bridge = m.Get("BridgeUniqueid")
		}
	case ami.EventBridgeLeave:
		if c := p.update(m, ""); c != nil && c.bridge == m.Get("BridgeUniqueid") {
			c.bridge = ""
		}
	case ami.EventDialBegin, ami.EventDialState, ami.EventDialEnd:
		src, dst := p.update(m, ""), p.update(m, "Dest")
		if ev == ami.EventDialBegin {
			if src != nil && src.app == "" {
				src.app = "Dial"
			}
			if dst != nil && dst.app == "" {
				dst.app = "AppDial"
			}
		}
	case ami.EventAgentCalled:
		if c := p.update(m, "Dest"); c != nil {
			c.app = "AppQueue"
		}
	case ami.EventQueueCallerJoin:
		if c := p.update(m, ""); c != nil {
			c.app = "Queue"
		}
		k := m.Get("Queue") + "|" + m.Get("Channel")
		p.queueSeen(m.Get("Queue"))
		if _, ok := p.wait[k]; !ok {
			p.waitOr = append(p.waitOr, k)
		}
		p.wait[k] = m
	case ami.EventQueueCallerLeave, ami.EventQueueCallerAbandon:
		p.update(m, "")
		delete(p.wait, m.Get("Queue")+"|"+m.Get("Channel"))
	case ami.EventQueueMemberAdded, ami.EventQueueMemberStatus, ami.EventQueueMemberPause:
		p.memberEvent(m, false)
	case ami.EventQueueMemberRemoved:
		iface := m.Get("StateInterface")
		if iface == "" {
			iface = m.Get("Interface")
		}
		delete(p.member, m.Get("Queue")+"|"+iface)
	case ami.EventExtensionStatus:
		k := m.Get("Exten") + "@" + m.Get("Context")
		if _, ok := p.exts[k]; !ok {
			p.extOrd = append(p.extOrd, k)
		}
		p.exts[k] = m
	case ami.EventDeviceStateChange:
		k := m.Get("Device")
		if _, ok := p.devs[k]; !ok {
			p.devOrd = append(p.devOrd, k)
		}
		p.devs[k] = m
	case ami.EventParkedCall:
		k := m.Get("ParkeeUniqueid")
		if _, ok := p.parked[k]; !ok {
			p.parkOr = append(p.parkOr, k)
		}
		p.parked[k] = m
	case ami.EventUnParkedCall, ami.EventParkedCallGiveUp, ami.EventParkedCallTimeOut:
		delete(p.parked, m.Get("ParkeeUniqueid"))
	default:
		p.update(m, "")
	}
}

// Lists answers the resync's list actions from the model: the items of
// CoreShowChannels, ExtensionStateList, DeviceStateList, ParkedCalls and
// QueueStatus,
// each with its action's ActionID, completing events included.
func (p *Model) Lists() [][]ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
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
		chans = append(chans, item(ami.EventCoreShowChannel, "csc", kv...))
	}
	chans = append(chans, item(ami.EventCoreShowChannelsComplete, "csc", "EventList", "Complete"))
	for _, k := range p.extOrd {
		exts = append(exts, relabel(p.exts[k], "esl"))
	}
	exts = append(exts, item(ami.EventExtensionStateListComplete, "esl", "EventList", "Complete"))
	for _, k := range p.devOrd {
		devs = append(devs, relabel(p.devs[k], "dsl"))
	}
	devs = append(devs, item(ami.EventDeviceStateListComplete, "dsl", "EventList", "Complete"))
	for _, k := range p.parkOr {
		if m, ok := p.parked[k]; ok {
			parks = append(parks, relabel(m, "pc"))
		}
	}
	parks = append(parks, item(ami.EventParkedCallsComplete, "pc", "EventList", "Complete"))
	var queues []ami.Message
	for _, q := range p.queues {
		queues = append(queues, item(ami.EventQueueParams, "qs", "Queue", q))
		for _, k := range p.memOrd {
			if mb := p.member[k]; mb != nil && mb["Queue"] == q {
				var kv []string
				for _, h := range queueMemberKeys {
					kv = append(kv, h[0], mb[h[0]])
				}
				queues = append(queues, item(ami.EventQueueMember, "qs", kv...))
			}
		}
		pos := 0
		for _, k := range p.waitOr {
			if w, ok := p.wait[k]; ok && w.Get("Queue") == q {
				pos++
				queues = append(queues, item(ami.EventQueueEntry, "qs", "Queue", q, "Position", fmt.Sprint(pos), "Channel", w.Get("Channel"),
					"Uniqueid", w.Get("Uniqueid"), "CallerIDNum", w.Get("CallerIDNum"), "CallerIDName", w.Get("CallerIDName"), "Wait", "0"))
			}
		}
	}
	queues = append(queues, item(ami.EventQueueStatusComplete, "qs", "EventList", "Complete"))
	return [][]ami.Message{chans, exts, devs, parks, queues}
}

// listActions are the actions Serve answers, in the order of Lists.
var listActions = []string{ami.ActionCoreShowChannels, ami.ActionExtensionStateList, ami.ActionDeviceStateList,
	ami.ActionParkedCalls, ami.ActionQueueStatus}

// Serve makes srv answer the list actions of a resync (CoreShowChannels,
// ExtensionStateList, DeviceStateList, ParkedCalls, QueueStatus) from the
// model as it is when each action arrives, as Asterisk answers from its
// state at that moment.
func (p *Model) Serve(srv *Server) {
	for i, name := range listActions {
		srv.Handle(name, func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
			items := p.Lists()[i]
			out := make([]ami.Message, 0, len(items)+1)
			out = append(out, Response("Success", "ActionID", req.ActionID(), "EventList", "start", "Message", "list will follow"))
			for _, m := range items {
				out = append(out, m.Set("ActionID", req.ActionID()))
			}
			return out
		})
	}
}
