package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// extState is what the engine keeps about an extension besides its
// channels; conversations are derived from the channels at Publish.
type extState struct {
	exten    string
	name     string // from Config.Names: wins
	astName  string // FreePBX's AMPUSER/<ext>/cidname
	epName   string // the name in the endpoint's callerid (PJSIPShowEndpoint)
	pbxName  string // the CallerIDName the PBX shows for its channels
	status   string
	statusAt uint64 // resyncState.events when a live event last set status
	dnd      bool   // AstDB DND/<ext>, or FreePBX's Custom:DND<ext> device state
	dndAt    uint64 // resyncState.events when a live Custom:DND device state last set dnd
	cf       string // AstDB CF/<ext>: unconditional forward target
	cfb      string // AstDB CFB/<ext>: forward on busy
	cfu      string // AstDB CFU/<ext>: forward when unavailable
	vm       *Voicemail
	vmAt     uint64 // resyncState.events when a live MessageWaiting last set vm
	detailed bool   // a PJSIPShowEndpoint answer was applied
	ip       string
	port     string
	ua       string
	chanType string
	context  string
	chans    []*channel
	// pub is its entity in the published ExtensionMap (e.pub.exts.cur),
	// nil until it is first published: what Publish compares the view
	// with, without a search of the map. Only storeExt changes it.
	pub *ent[Extension]
}

// storeExt publishes xe as x's entity: in the ExtensionMap being written
// and in x.pub, so the two never differ.
func (e *Engine) storeExt(x *extState, xe *ent[Extension]) {
	e.pub.setExt(x.exten, xe, x.pub)
	x.pub = xe
}

// displayName: the users file overrides what the PBX says; of the PBX's
// names, FreePBX's own (AstDB) first, then the endpoint's callerid, then
// what its calls showed.
func (x *extState) displayName() string {
	switch {
	case x.name != "":
		return x.name
	case x.astName != "":
		return x.astName
	case x.epName != "":
		return x.epName
	}
	return x.pbxName
}

func (e *Engine) ensureExt(num string) *extState { return e.extFound(e.exts[num], num) }

// extFound is ensureExt of x, num's extension looked up already (nil:
// none yet).
func (e *Engine) extFound(x *extState, num string) *extState {
	if x == nil {
		x = &extState{exten: strings.Clone(num), status: "online"}
		e.exts[x.exten] = x
	}
	e.dirtyExt[x.exten] = struct{}{}
	return x
}

// extFor returns the extension an endpoint names, creating it when the
// endpoint classifies as an extension; nil otherwise.
func (e *Engine) extFor(endpoint string) *extState {
	k, x := e.classifyExt(endpoint)
	if k != ownerExt {
		return nil
	}
	return e.extFound(x, endpoint)
}

// statusFromExtensionState maps ExtensionStatus Status codes (ast_extension_states).
func statusFromExtensionState(code int, text string) string {
	switch code {
	case 0:
		return "online"
	case 1, 2:
		return "busy"
	case 4, -1, -2:
		return "offline"
	case 8:
		return "ringing"
	case 9:
		return "busy_ringing"
	case 16, 17:
		return "onhold"
	}
	switch strings.ToLower(text) {
	case "idle":
		return "online"
	case "inuse", "busy":
		return "busy"
	case "unavailable", "removed", "deleted":
		return "offline"
	case "ringing":
		return "ringing"
	case "inuse&ringing":
		return "busy_ringing"
	case "hold", "inuse&hold":
		return "onhold"
	}
	return ""
}

// customDND prefixes the custom device state FreePBX keeps per extension
// for do-not-disturb (Custom:DND201), set by *76 and by ctibridge's dnd
// action, and listed by DeviceStateList.
const customDND = "Custom:DND"

// statusFromDeviceState maps device states, both the DeviceStateChange
// tokens (NOT_INUSE) and the PJSIPShowEndpoints texts ("Not in use").
func statusFromDeviceState(s string) string {
	switch strings.ToUpper(strings.ReplaceAll(s, " ", "_")) {
	case "NOT_INUSE", "NOT_IN_USE", "IDLE":
		return "online"
	case "INUSE", "IN_USE", "BUSY":
		return "busy"
	case "UNAVAILABLE", "INVALID":
		return "offline"
	case "RINGING":
		return "ringing"
	case "RINGINUSE", "RING+INUSE", "RING_IN_USE":
		return "busy_ringing"
	case "ONHOLD", "ON_HOLD":
		return "onhold"
	}
	return "" // UNKNOWN: keep what we have
}

// setExtStatus sets x's device status from m (ExtensionStatus,
// DeviceStateChange, an endpoint item) unless m is an item older than what
// a live event set (staleItem).
func (e *Engine) setExtStatus(x *extState, m ami.Message, st string) {
	if !e.staleItem(m, x.statusAt) {
		x.status = st
		x.statusAt = e.liveStamp(m, x.statusAt)
	}
}

// setTrunkStatus is setExtStatus for a trunk.
func (e *Engine) setTrunkStatus(t *trunkState, m ami.Message, st string) {
	if !e.staleItem(m, t.statusAt) {
		t.status = trunkStatus(st)
		t.statusAt = e.liveStamp(m, t.statusAt)
	}
}

// extStatusKeys are what onExtensionStatus reads: Exten, Status,
// StatusText, Context.
var extStatusKeys = ami.NewKeySet("Exten", "Status", "StatusText", "Context")

func (e *Engine) onExtensionStatus(m ami.Message) {
	var h [4]string
	m.Read(extStatusKeys, h[:])
	x := e.extFor(h[0])
	if x == nil {
		return
	}
	code, err := parseInt(h[1])
	if err != nil {
		code = 99
	}
	if st := statusFromExtensionState(code, h[2]); st != "" {
		e.setExtStatus(x, m, st)
	}
	if ctx := h[3]; ctx != "" && x.context == "" {
		x.context = strings.Clone(ctx)
	}
}

func (e *Engine) onDeviceStateChange(m ami.Message) {
	dev := m.Get("Device")
	if len(dev) > len(mwiPrefix) && strings.EqualFold(dev[:len(mwiPrefix)], mwiPrefix) {
		e.askMailbox(dev[len(mwiPrefix):]) // a mailbox exists: count its messages once
		return
	}
	if len(dev) > len(customDND) && strings.EqualFold(dev[:len(customDND)], customDND) {
		// FreePBX's do-not-disturb: BUSY while on, NOT_INUSE off.
		if x := e.extFor(dev[len(customDND):]); x != nil && !e.staleItem(m, x.dndAt) {
			x.dnd = statusFromDeviceState(m.Get("State")) == "busy"
			x.dndAt = e.liveStamp(m, x.dndAt)
		}
		return
	}
	tech, ep := deviceEndpoint(dev)
	if ep == "" {
		return
	}
	st := statusFromDeviceState(m.Get("State"))
	if st == "" {
		return
	}
	switch e.classify(ep) {
	case ownerExt:
		x := e.ensureExt(ep)
		e.setExtStatus(x, m, st)
		if x.chanType == "" {
			x.chanType = strings.ToLower(tech)
		}
	case ownerTrunk:
		t := e.ensureTrunk(ep)
		e.setTrunkStatus(t, m, st)
		if t.chanType == "" {
			t.chanType = strings.ToLower(tech)
		}
	}
}

// splitURI takes host and port out of "sip:201@127.0.0.1:5201;ob".
func splitURI(uri string) (host, port string) {
	if i := strings.IndexByte(uri, ':'); i >= 0 && i < 5 {
		uri = uri[i+1:] // scheme
	}
	if i := strings.IndexByte(uri, '@'); i >= 0 {
		uri = uri[i+1:]
	}
	if i := strings.IndexAny(uri, ";?>"); i >= 0 {
		uri = uri[:i]
	}
	if strings.HasPrefix(uri, "[") { // IPv6
		if i := strings.IndexByte(uri, ']'); i > 0 {
			host, rest := uri[1:i], uri[i+1:]
			return host, strings.TrimPrefix(rest, ":")
		}
	}
	if i := strings.LastIndexByte(uri, ':'); i >= 0 {
		return uri[:i], uri[i+1:]
	}
	return uri, ""
}

// contactEndpoint finds the endpoint of a contact event.
func contactEndpoint(m ami.Message) string {
	if ep := m.Get("EndpointName"); ep != "" {
		return ep
	}
	if ep := m.Get("Endpoint"); ep != "" { // ContactList items
		return ep
	}
	aor := m.Get("AOR")
	if i := strings.IndexByte(aor, '/'); i >= 0 {
		aor = aor[:i]
	}
	return aor
}

func (e *Engine) onContactStatus(m ami.Message) {
	ep := contactEndpoint(m)
	status := m.Get("ContactStatus")
	if status == "" {
		status = m.Get("Status")
	}
	switch e.classify(ep) {
	case ownerExt:
		x := e.ensureExt(ep)
		if m.Event() == ami.EventContactStatus && allDigits(ep) {
			// A phone (re)registered: its endpoint may have changed too.
			e.ask(ami.NewAction(ami.ActionPJSIPShowEndpoint, "Endpoint", ep))
		}
		if uri := m.Get("URI"); uri != "" {
			h, p := splitURI(uri)
			x.ip, x.port = strings.Clone(h), strings.Clone(p)
		}
		if ua := m.Get("UserAgent"); ua != "" {
			x.ua = strings.Clone(ua)
		}
		// A ContactStatusDetail item of a late answer never brings back
		// "online" over a live unregistration (staleItem).
		switch strings.ToLower(status) {
		case "unreachable", "removed":
			e.setExtStatus(x, m, "offline")
		case "reachable", "created", "nonqualified", "updated":
			if x.status == "offline" {
				e.setExtStatus(x, m, "online")
			}
		}
	case ownerTrunk:
		t := e.ensureTrunk(ep)
		switch strings.ToLower(status) {
		case "unreachable", "removed":
			e.setTrunkStatus(t, m, "offline")
		case "reachable", "created", "nonqualified", "updated":
			if t.status == "offline" || t.status == "unmonitored" {
				e.setTrunkStatus(t, m, "online")
			}
		}
	}
}

func (e *Engine) onPeerStatus(m ami.Message) {
	_, ep := deviceEndpoint(m.Get("Peer"))
	status := strings.ToLower(m.Get("PeerStatus"))
	switch e.classify(ep) {
	case ownerExt:
		x := e.ensureExt(ep)
		if addr := m.Get("Address"); addr != "" {
			h, p := splitURI(addr)
			x.ip, x.port = strings.Clone(h), strings.Clone(p)
		}
		switch status {
		case "unreachable", "unregistered", "rejected":
			x.status = "offline"
		case "reachable", "registered":
			if x.status == "offline" {
				x.status = "online"
			}
		}
	case ownerTrunk:
		t := e.ensureTrunk(ep)
		switch status {
		case "unreachable", "unregistered", "rejected":
			t.status = "offline"
		case "reachable", "registered":
			if t.status == "offline" || t.status == "unmonitored" {
				t.status = "online"
			}
		}
	}
}

// onEndpoint handles PJSIPShowEndpoints / PJSIPShowEndpoint items.
func (e *Engine) onEndpoint(m ami.Message) {
	ep := m.Get("ObjectName")
	st := statusFromDeviceState(m.Get("DeviceState"))
	switch e.classify(ep) {
	case ownerExt:
		x := e.ensureExt(ep)
		if st != "" {
			e.setExtStatus(x, m, st)
		}
		if x.chanType == "" {
			x.chanType = "pjsip"
		}
		if ctx := m.Get("Context"); ctx != "" {
			x.context = strings.Clone(ctx)
		}
		if m.Event() == ami.EventEndpointDetail {
			x.detailed = true
			if name := callerIDName(m.Get("Callerid")); name != x.epName && known(name) && validName(name) {
				before := x.displayName()
				x.epName = strings.Clone(name)
				e.renamed(x, before)
			}
			for box := range strings.SplitSeq(m.Get("Mailboxes"), ",") {
				e.askMailbox(strings.TrimSpace(box))
			}
		} else if (e.resync.active || !x.detailed) && allDigits(ep) {
			// Listed: its name and mailboxes are in the endpoint's details.
			e.ask(ami.NewAction(ami.ActionPJSIPShowEndpoint, "Endpoint", ep))
		}
		if c := m.Get("Contacts"); c != "" && x.ip == "" {
			// "201/sip:201@127.0.0.1:5201,"
			c = strings.TrimRight(c, ",")
			if i := strings.IndexByte(c, ','); i >= 0 {
				c = c[:i]
			}
			if i := strings.IndexByte(c, '/'); i >= 0 {
				h, p := splitURI(c[i+1:])
				x.ip, x.port = strings.Clone(h), strings.Clone(p)
			}
		}
	case ownerTrunk:
		t := e.ensureTrunk(ep)
		if st != "" {
			e.setTrunkStatus(t, m, st)
		}
		if t.chanType == "" {
			t.chanType = "pjsip"
		}
	}
}

// callerIDName takes the name out of `"Alice Rossi" <201>`.
func callerIDName(cid string) string {
	cid = strings.TrimSpace(cid)
	if i := strings.IndexByte(cid, '<'); i >= 0 {
		cid = strings.TrimSpace(cid[:i])
	}
	return strings.Trim(cid, `"`)
}

// endpointRefreshFollowups re-lists the endpoints periodically: an
// endpoint added since is then detailed (onEndpoint asks), and, when the
// names are due, every endpoint is.
func endpointRefreshFollowups(e *Engine) []ami.Message {
	if e.namesDue() {
		for _, x := range e.exts {
			x.detailed = false
		}
	}
	return []ami.Message{ami.NewAction(ami.ActionPJSIPShowEndpoints)}
}
