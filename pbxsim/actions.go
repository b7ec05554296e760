package pbxsim

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

func resp(status string, kv ...string) ami.Message {
	hs := make([]ami.Header, 0, 1+len(kv)/2)
	hs = append(hs, ami.Header{Key: "Response", Value: status})
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

func errResp(msg string) []ami.Message { return []ami.Message{resp("Error", "Message", msg)} }

// list builds an event list as Asterisk sends it: the response with
// "EventList: start", the items, and the completing event with ListItems.
// Items carry ActionID as their second header unless they already hold one
// (QueueStatus and ParkedCalls items put it last).
func list(req ami.Message, startMsg, complete string, items []ami.Message, extra ...string) []ami.Message {
	id, hasID := req.Lookup("ActionID")
	out := make([]ami.Message, 0, len(items)+2)
	out = append(out, resp("Success", "EventList", "start", "Message", startMsg))
	for _, it := range items {
		out = append(out, it)
	}
	hs := []ami.Header{{Key: "Event", Value: complete}}
	if hasID {
		hs = append(hs, ami.Header{Key: "ActionID", Value: id})
	}
	hs = append(hs, ami.Header{Key: "EventList", Value: "Complete"}, ami.Header{Key: "ListItems", Value: strconv.Itoa(len(items))})
	for i := 0; i+1 < len(extra); i += 2 {
		hs = append(hs, ami.Header{Key: extra[i], Value: extra[i+1]})
	}
	return append(out, ami.NewMessage(hs...))
}

func item(event string, kv ...string) ami.Message {
	hs := make([]ami.Header, 0, 1+len(kv)/2)
	hs = append(hs, ami.Header{Key: "Event", Value: event})
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

// EventList and Item build an action's event list and its items as
// pbxsim does, for other fake managers (loadtest's SynthAMI).
func EventList(req ami.Message, startMsg, complete string, items []ami.Message) []ami.Message {
	return list(req, startMsg, complete, items)
}

// Item is an event list's item: Event, then kv's headers in order.
func Item(event string, kv ...string) ami.Message { return item(event, kv...) }

// withTrailingID appends ActionID as the last header, where app_queue and
// res_parking put it.
func withTrailingID(m ami.Message, req ami.Message) ami.Message {
	if id, ok := req.Lookup("ActionID"); ok {
		m = m.Add("ActionID", id)
	}
	return m
}

func (p *PBX) registerAMI() {
	s := p.amiSrv
	s.Handle(ami.ActionCoreShowChannels, p.actCoreShowChannels)
	s.Handle(ami.ActionExtensionStateList, p.actExtensionStateList)
	s.Handle(ami.ActionExtensionState, p.actExtensionState)
	s.Handle(ami.ActionDeviceStateList, p.actDeviceStateList)
	s.Handle(ami.ActionPJSIPShowEndpoints, p.actPJSIPShowEndpoints)
	s.Handle(ami.ActionPJSIPShowEndpoint, p.actPJSIPShowEndpoint)
	s.Handle(ami.ActionPJSIPShowContacts, p.actPJSIPShowContacts)
	s.Handle(ami.ActionQueueStatus, p.actQueueStatus)
	s.Handle(ami.ActionParkedCalls, p.actParkedCalls)
	s.Handle(ami.ActionParkinglots, p.actParkinglots)
	s.Handle(ami.ActionCoreStatus, p.actCoreStatus)
	s.Handle(ami.ActionOriginate, p.actOriginate)
	s.Handle(ami.ActionHangup, p.actHangup)
	s.Handle(ami.ActionRedirect, p.actRedirect)
	s.Handle(ami.ActionBlindTransfer, p.actBlindTransfer)
	s.Handle(ami.ActionAtxfer, p.actAtxfer)
	s.Handle(ami.ActionMailboxCount, p.actMailboxCount)
	s.Handle(ami.ActionMailboxStatus, p.actMailboxStatus)
	s.Handle(ami.ActionVoicemailUsersList, p.actVoicemailUsersList)
	s.Handle(ami.ActionPark, p.actPark)
	s.Handle(ami.ActionQueuePause, p.actQueuePause)
	s.Handle(ami.ActionQueueAdd, p.actQueueAdd)
	s.Handle(ami.ActionQueueRemove, p.actQueueRemove)
	s.Handle(ami.ActionQueueSummary, p.actQueueSummary)
}

// sortedChannels returns live channels in creation order. p.mu held.
func (p *PBX) sortedChannels() []*channel {
	out := make([]*channel, 0, len(p.channels))
	for _, ch := range p.channels {
		out = append(out, ch)
	}
	slices.SortFunc(out, func(a, b *channel) int { return strings.Compare(a.name[len(a.name)-8:], b.name[len(b.name)-8:]) })
	return out
}

func (p *PBX) actCoreShowChannels(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var items []ami.Message
	for _, ch := range p.sortedChannels() {
		hs := []ami.Header{{Key: "Event", Value: ami.EventCoreShowChannel}}
		hs = chanHeaders(hs, "", ch)
		bid := ""
		if ch.bridge != nil {
			bid = ch.bridge.id
		}
		hs = append(hs, ami.Header{Key: "Application", Value: ch.app}, ami.Header{Key: "ApplicationData", Value: ch.appData},
			ami.Header{Key: "Duration", Value: fmtDuration(now.Sub(ch.created))}, ami.Header{Key: "BridgeId", Value: bid})
		items = append(items, ami.NewMessage(hs...))
	}
	return list(req, "Channels will follow", ami.EventCoreShowChannelsComplete, items)
}

func (p *PBX) sortedExts() []*ext {
	out := make([]*ext, 0, len(p.exts))
	for _, e := range p.exts {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *ext) int { return strings.Compare(a.num, b.num) })
	return out
}

func (p *PBX) extStatusKV(e *ext) []string {
	st, txt := e.hint.extStatus()
	hint := "PJSIP/" + e.num
	for _, n := range e.devices {
		hint += "&PJSIP/" + n
	}
	return []string{"Exten", e.num, "Context", p.cfg.Context, "Hint", hint, "Status", strconv.Itoa(st), "StatusText", txt}
}

func (p *PBX) actExtensionStateList(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []ami.Message
	for _, e := range p.sortedExts() {
		if e.user != "" {
			continue // a device has no hint of its own
		}
		items = append(items, item(ami.EventExtensionStatus, p.extStatusKV(e)...))
	}
	return list(req, "Extension Statuses will follow", ami.EventExtensionStateListComplete, items)
}

func (p *PBX) actExtensionState(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ext, ok := strings.CutPrefix(req.Get("Exten"), "*76"); ok {
		dev := "Custom:DND" + ext
		p.feat.mu.Lock()
		state, set := p.feat.custom[dev]
		p.feat.mu.Unlock()
		if set {
			st, txt := customExtStatus(state)
			return []ami.Message{resp("Success", "Message", "Extension Status", "Exten", req.Get("Exten"),
				"Context", p.cfg.Context, "Hint", dev, "Status", st, "StatusText", txt)}
		}
	}
	e := p.exts[req.Get("Exten")]
	if e == nil {
		return []ami.Message{resp("Success", "Message", "Extension Status", "Exten", req.Get("Exten"),
			"Context", req.Get("Context"), "Hint", "", "Status", "-1", "StatusText", "Unknown")}
	}
	return []ami.Message{resp("Success", append([]string{"Message", "Extension Status"}, p.extStatusKV(e)...)...)}
}

func (p *PBX) actDeviceStateList(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []ami.Message
	for _, e := range p.sortedExts() {
		items = append(items, item(ami.EventDeviceStateChange, "Device", "PJSIP/"+e.num, "State", e.dev.device()))
	}
	for s := parkFirst; s <= parkLast; s++ {
		st := "NOT_INUSE"
		if p.parked[s] != nil {
			st = "INUSE"
		}
		items = append(items, item(ami.EventDeviceStateChange, "Device", parkDevice(s), "State", st))
	}
	items = append(items, p.customStates()...)
	items = append(items, p.mwiStates()...)
	return list(req, "Device State Changes will follow", ami.EventDeviceStateListComplete, items)
}

func (p *PBX) actPJSIPShowEndpoints(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []ami.Message
	for _, e := range p.sortedExts() {
		contacts := ""
		if e.contact != nil {
			contacts = e.num + "/" + e.contact.uri.String() + ","
		}
		items = append(items, item(ami.EventEndpointList, "ObjectType", "endpoint", "ObjectName", e.num, "Transport", "transport-udp",
			"Aor", e.num, "Auths", "", "OutboundAuths", "", "Contacts", contacts, "DeviceState", e.dev.endpointState(),
			"ActiveChannels", strconv.Itoa(len(e.chans))))
	}
	active := 0
	for _, ch := range p.channels {
		if ch.endpoint == p.cfg.Trunk {
			active++
		}
	}
	items = append(items, item(ami.EventEndpointList, "ObjectType", "endpoint", "ObjectName", p.cfg.Trunk, "Transport", "transport-udp",
		"Aor", p.cfg.Trunk, "Auths", "", "OutboundAuths", "", "Contacts", "", "DeviceState", "Not in use",
		"ActiveChannels", strconv.Itoa(active)))
	return list(req, "A listing of Endpoints follows, presented as EndpointList events", ami.EventEndpointListComplete, items)
}

func (p *PBX) actPJSIPShowContacts(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []ami.Message
	for _, e := range p.sortedExts() {
		c := e.contact
		if c == nil {
			continue
		}
		host, port, _ := strings.Cut(c.source, ":")
		items = append(items, item(ami.EventContactList, "ObjectType", "contact", "ObjectName", e.num+";@"+c.callID,
			"ViaAddr", host, "QualifyTimeout", "3.000000", "CallId", c.callID, "RegServer", "", "PruneOnBoot", "false",
			"Path", "", "Endpoint", e.num, "ViaPort", port, "AuthenticateQualify", "false", "Uri", c.uri.String(),
			"QualifyFrequency", "0", "UserAgent", c.userAgent, "ExpirationTime", strconv.FormatInt(c.expires.Unix(), 10),
			"OutboundProxy", "", "Status", "NonQualified", "RoundtripUsec", "N/A"))
	}
	if len(items) == 0 {
		return errResp("No Contacts found")
	}
	return list(req, "A listing of Contacts follows, presented as ContactList events", ami.EventContactListComplete, items)
}

// queueMemberStatus is app_queue's member Status: the device state as
// AST_DEVICE_* numbers.
func queueMemberStatus(d devState) string {
	return [...]string{"1", "2", "5", "6", "7", "8"}[d]
}

func (p *PBX) actParkedCalls(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var items []ami.Message
	for s := parkFirst; s <= parkLast; s++ {
		if x := p.parked[s]; x != nil {
			m := p.parkedEvent(ami.EventParkedCall, x, nil)
			m = m.Del("Privilege") // list items carry no Privilege
			items = append(items, withTrailingID(m, req))
		}
	}
	n := strconv.Itoa(len(items))
	return list(req, "Parked calls will follow", ami.EventParkedCallsComplete, items, "Total", n)
}

func (p *PBX) actParkinglots(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	items := []ami.Message{item(ami.EventParkinglot, "Name", parkLot, "StartSpace", strconv.Itoa(parkFirst),
		"StopSpace", strconv.Itoa(parkLast), "Timeout", strconv.Itoa(int(p.cfg.ParkingTimeout.Seconds())))}
	return list(req, "Parking lots will follow", ami.EventParkinglotsComplete, items)
}

func (p *PBX) actCoreStatus(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return []ami.Message{resp("Success", "CoreStartupDate", p.started.Format("2006-01-02"),
		"CoreStartupTime", p.started.Format("15:04:05"), "CoreReloadDate", p.started.Format("2006-01-02"),
		"CoreReloadTime", p.started.Format("15:04:05"), "CoreCurrentCalls", strconv.Itoa(len(p.channels)),
		"CoreProcessedCalls", strconv.FormatUint(p.stats.Calls, 10))}
}

// channelByName finds a live channel and its call. p.mu held.
func (p *PBX) channelByName(name string) *channel {
	ch := p.channels[name]
	if ch == nil || ch.gone {
		return nil
	}
	return ch
}

func (p *PBX) actHangup(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	cause, _ := strconv.Atoi(req.Get("Cause"))
	p.mu.Lock()
	ch := p.channelByName(req.Get("Channel"))
	if ch == nil {
		p.mu.Unlock()
		return errResp("No such channel")
	}
	c := ch.call
	p.mu.Unlock()
	c.post(callEvent{kind: evHangup, ch: ch, cause: cause})
	return []ami.Message{resp("Success", "Message", "Channel Hungup")}
}

func (p *PBX) actRedirect(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name := req.Get("Channel")
	exten := req.Get("Exten")
	if name == "" || exten == "" {
		return errResp("Channel not specified")
	}
	p.mu.Lock()
	ch := p.channelByName(name)
	if ch == nil {
		p.mu.Unlock()
		return errResp("Channel does not exist: " + name)
	}
	c := ch.call
	p.mu.Unlock()
	ctx := req.Get("Context")
	if ctx == "" {
		ctx = p.cfg.Context
	}
	c.post(callEvent{kind: evRedirect, ch: ch, context: ctx, exten: exten})
	return []ami.Message{resp("Success", "Message", "Redirect successful")}
}

func (p *PBX) actBlindTransfer(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name := req.Get("Channel")
	exten := req.Get("Exten")
	if exten == "" {
		return errResp("No extension specified")
	}
	p.mu.Lock()
	t := p.channelByName(name)
	if t == nil {
		p.mu.Unlock()
		return errResp("No such channel")
	}
	var peer *channel
	if t.bridge != nil {
		for _, x := range t.bridge.chans {
			if x != t {
				peer = x
			}
		}
	}
	if peer == nil {
		p.mu.Unlock()
		return errResp("Transfer failed")
	}
	c := t.call
	p.mu.Unlock()
	ctx := req.Get("Context")
	if ctx == "" {
		ctx = p.cfg.Context
	}
	c.post(callEvent{kind: evRedirect, ch: peer, other: t, context: ctx, exten: exten})
	return []ami.Message{resp("Success", "Message", "Transfer succeeded")}
}

func (p *PBX) actPark(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	ch := p.channelByName(req.Get("Channel"))
	if ch == nil {
		p.mu.Unlock()
		return errResp("Channel does not exist: " + req.Get("Channel"))
	}
	if strings.HasPrefix(ch.name, "Local/") {
		p.mu.Unlock()
		return errResp("Park of a Local channel is not simulated")
	}
	c := ch.call
	p.mu.Unlock()
	c.post(callEvent{kind: evPark, ch: ch})
	// Asterisk 22 ends this Message line with a stray bare LF (see the
	// park_retrieve recording); ami.Message refuses LF in values, so
	// pbxsim sends the clean line.
	return []ami.Message{resp("Success", "Message", "Park successful")}
}
