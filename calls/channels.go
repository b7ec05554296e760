package calls

import (
	"math"
	"strconv"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Asterisk channel states (ChannelState header).
const (
	stateDown    = 0
	stateRing    = 4 // the device asked for a call: it is the originating side
	stateRinging = 5
	stateUp      = 6
)

// channel is one Asterisk channel as the engine knows it. Its fields are
// ordered by use: what every event about it reads or writes (the batch
// mark and the links changed follows, its state and stamps), then the
// caller ID a live event refreshes, then what Publish's derivation and
// the rarer events read. A channel event then touches the first cache
// lines of a channel only, not all of them (a call centre has thousands
// of channels, and the events of a batch are about channels all over).
type channel struct {
	touched     uint64     // Engine.touchGen of the batch that touched it (dirty.go)
	bridge      *bridge    // the bridge it is in
	prevBridge  *bridge    // the talking bridge it just left, others still in it (attended transfer)
	partner     *channel   // the other half of a Local channel pair
	dialledBy   *channel   // the channel that dialled it
	m           *chanMore  // what few channels need, made on first need: keeps channel small
	dialTargets []*channel // channels it dials or dialled and got
	state       int
	liveAt      uint64 // resyncState.events when a live event last set its headers
	bridgeAt    uint64 // the same for its bridge membership

	kind       ownerKind
	gone       bool // hung up or dropped
	local      bool
	originator bool // created by its device asking for a call (state Ring)
	originated bool // rung by the PBX with no calling channel (Originate)
	dialledOut bool // has dialled someone
	pickup     bool // answered someone else's ringing call
	viaTrunk   bool
	hold       bool
	conference bool
	confirmed  bool  // listed by the CoreShowChannels of the running resync
	rang       bool  // extenRinging already emitted
	ownerAt    int32 // its index in its owner's chans (chanlist.go), in the bools' padding

	callerNum  string
	callerName string
	connNum    string
	connName   string
	linkedid   string

	uid, name  string
	owner      string // extension number or trunk name
	tech       string
	exten      string // dialled extension at creation
	created    int64  // ms
	seq        uint64 // creation order
	gen        uint64 // resync generation it was created or confirmed in
	answeredAt int64
	recording  string
	queue      string
	lastID     string // conversation id while it had a peer: kept when the peer leaves
}

// chanMore is what only some channels need.
type chanMore struct {
	account  string   // AccountCode: ctibridge's Originate puts the destination there
	xfer     *xfer    // the attended transfer it takes part in
	parkedIn string   // parking space it waits in
	confRoom string   // the ConfBridge room it is a member of
	spyee    *channel // the channel it spies on (ChanSpy)
	spyMode  string   // listen | whisper | barge, from its Originate's ChanSpy options
	mailbox  string   // the mailbox VoiceMail records for while it runs it, "204@default"
}

var noMore chanMore

// more returns c's chanMore, making it.
func (c *channel) more() *chanMore {
	if c.m == nil {
		c.m = &chanMore{}
	}
	return c.m
}

// get returns c's chanMore for reading only (the shared zero value when
// none: never write through it).
func (c *channel) get() *chanMore {
	if c.m == nil {
		return &noMore
	}
	return c.m
}

// chanByUID finds a channel by Uniqueid, else by name.
func (e *Engine) chanBy(uid, name string) *channel {
	if uid != "" {
		if c := e.chans[uid]; c != nil {
			return c
		}
	}
	if name != "" {
		return e.byName[name]
	}
	return nil
}

// chanOf finds the channel an event is about (Uniqueid, Channel), counting
// it as unknown when absent.
func (e *Engine) chanOf(m ami.Message) *channel {
	c := e.chanBy(m.Get("Uniqueid"), m.Get("Channel"))
	if c == nil {
		e.stats.Unknown++
	}
	return c
}

// atof is s as a number, 0 when it is none (ServicelevelPerf: "87.5").
func atof(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// newChannel creates a channel from the common channel headers of m.
func (e *Engine) newChannel(m ami.Message, uid, name string) *channel {
	h := readHdrs(m, chanKeys)
	return e.newChannelFrom(&h, uid, name)
}

// newChannelFrom is newChannel from the headers read.
func (e *Engine) newChannelFrom(h *chanHdrs, uid, name string) *channel {
	e.chanSeq++
	c := &channel{
		uid:        uid,
		name:       name,
		linkedid:   h.v[hLinkedid],
		state:      atoi(h.v[hChannelState]),
		callerNum:  h.v[hCallerIDNum],
		callerName: h.v[hCallerIDName],
		connNum:    h.v[hConnectedLineNum],
		connName:   h.v[hConnectedLineName],
		exten:      h.v[hExten],
		created:    e.nowMs(),
		seq:        e.chanSeq,
		gen:        e.resync.gen,
		recording:  "false",
	}
	if c.linkedid == "" {
		c.linkedid = uid
	}
	c.originator = c.state == stateRing || c.state == stateUp
	if a := h.v[hAccountCode]; a != "" {
		// Asterisk (and pbxsim) set it with NewAccountCode after
		// Newchannel; a channel already up carries it here in the list
		// items of a resync (CoreShowChannel, Status).
		c.more().account = a
	}
	tech, ep := splitChannel(name)
	c.tech = tech
	var x *extState // ep's, when known (classifyExt)
	switch {
	case tech == "Local":
		c.local = true
		if n := len(name); n > 2 && name[n-2] == ';' {
			other := name[:n-1] + "1"
			if name[n-1] == '1' {
				other = name[:n-1] + "2"
			}
			if p := e.byName[other]; p != nil {
				c.partner, p.partner = p, c
			}
		}
	case phoneTech(tech):
		c.kind, x = e.classifyExt(ep)
		c.owner = ep
	}
	e.chans[uid] = c
	e.byName[name] = c
	switch c.kind {
	case ownerExt:
		x = e.ownerOf(ep, x) // a device's user's (devices.go)
		c.owner = x.exten    // ep's bytes, shared: hashing it reads no old message
		x.chans = addOwned(x.chans, c)
		e.busyExt[x.exten] = x
		if x.chanType == "" {
			x.chanType = strings.ToLower(tech)
		}
		if known(c.callerName) && c.callerNum == ep && x.exten == ep && x.pbxName != c.callerName {
			before := x.displayName()
			x.pbxName = c.callerName
			e.renamed(x, before)
		}
		if ctx := h.v[hContext]; ctx != "" && x.context == "" {
			x.context = ctx
		}
	case ownerTrunk:
		t := e.ensureTrunk(ep)
		c.owner = t.name
		t.chans = addOwned(t.chans, c)
		e.busyTrk[t.name] = t
		if t.chanType == "" {
			t.chanType = strings.ToLower(tech)
		}
	}
	e.changed(c)
	return c
}

// dropChannel forgets a channel: hangup, or a ghost removed by a resync.
func (e *Engine) dropChannel(c *channel) {
	if c.gone {
		return
	}
	e.changed(c)
	c.gone = true
	e.leaveBridge(c)
	delete(e.chans, c.uid)
	if e.byName[c.name] == c {
		delete(e.byName, c.name)
	}
	// The other half of a Local pair keeps its link to this one, gone:
	// the call through the pair is over (follow).
	c.partner = nil
	switch c.kind {
	case ownerExt:
		if x := e.exts[c.owner]; x != nil {
			if x.chans = removeOwned(x.chans, c); len(x.chans) == 0 {
				delete(e.busyExt, x.exten)
			}
		}
	case ownerTrunk:
		if t := e.trunks[c.owner]; t != nil {
			if t.chans = removeOwned(t.chans, c); len(t.chans) == 0 {
				delete(e.busyTrk, t.name)
			}
		}
	}
	if c.get().mailbox != "" {
		e.inVM--
	}
	// A caller waiting in a queue or parked, or a conference member,
	// cannot outlive its channel.
	if c.get().confRoom != "" {
		e.confLeave(c)
	}
	if len(e.inSL) > 0 {
		delete(e.inSL, c.uid) // its call never completed (AgentComplete comes before its Hangup)
	}
	// (waitIn says whether it waits anywhere: most channels never do.)
	if e.waitIn[c.name] > 0 {
		for _, q := range e.queues {
			if _, ok := q.waiting.m[c.name]; ok {
				e.unwait(q, c.name)
				e.dirtyQueue[q.name] = struct{}{}
			}
		}
	}
	for _, p := range e.parks {
		if p.caller != nil && (p.caller.Channel == c.name) {
			p.caller = nil
			e.dirtyPark[p.space] = struct{}{}
			e.touchParkLegs(p.space)
		}
	}
}

// updateCommon refreshes the channel headers every live channel event
// carries.
func (e *Engine) updateCommon(c *channel, m ami.Message) {
	h := readHdrs(m, chanKeys)
	e.updateFrom(c, &h)
}

// updateFrom is updateCommon from the headers read.
func (e *Engine) updateFrom(c *channel, h *chanHdrs) {
	c.liveAt = e.resync.events
	e.refreshFrom(c, h)
}

// refreshCommon is updateCommon without the live stamp (list items).
func (e *Engine) refreshCommon(c *channel, m ami.Message) {
	h := readHdrs(m, chanKeys)
	e.refreshFrom(c, &h)
}

// refreshFrom is refreshCommon from the headers read.
func (e *Engine) refreshFrom(c *channel, h *chanHdrs) {
	if h.has(hChannelState) {
		if st := atoi(h.v[hChannelState]); st != c.state {
			c.state = st
			if st == stateRinging {
				e.noteRinging(c)
			}
			if st == stateUp && c.answeredAt == 0 && c.get().mailbox != "" {
				c.answeredAt = e.nowMs() // VoiceMail answered it
			}
		}
	}
	if v := h.v[hCallerIDNum]; v != "" {
		c.callerNum = v
	}
	if v := h.v[hCallerIDName]; v != "" {
		c.callerName = v
	}
	if v := h.v[hConnectedLineNum]; v != "" {
		c.connNum = v
	}
	if v := h.v[hConnectedLineName]; v != "" {
		c.connName = v
	}
	if v := h.v[hLinkedid]; v != "" {
		c.linkedid = v
	}
	e.changed(c)
}

// noteRinging queues an extenRinging for a phone rung by a call to it;
// never for the first leg of ctibridge's own Originate (click-to-call,
// pickup, spy), which rings the clicking user's own phone.
func (e *Engine) noteRinging(c *channel) {
	if c.kind == ownerExt && !c.rang && !c.isOut() && !c.ownOriginate() {
		c.rang = true
		if x := e.exts[c.owner]; x != nil && len(x.chans) > 1 {
			for _, o := range x.chans {
				if o != c && o.rang && !o.gone && o.linkedid == c.linkedid && !o.isOut() {
					return // another of the user's devices rings for the same call
				}
			}
		}
		e.ringing = append(e.ringing, c)
	}
}

// ownOriginate reports a leg rung by an Originate that named its
// destination in AccountCode, as ctibridge's actions do.
func (c *channel) ownOriginate() bool {
	a := c.get().account
	return c.originated && c.dialledBy == nil && a != "" && a != c.owner
}

func (e *Engine) touchKnown(m ami.Message) {
	h := readHdrs(m, chanKeys)
	if c := e.chanOfHdrs(&h); c != nil {
		e.updateFrom(c, &h)
	}
}

func (e *Engine) onNewchannel(m ami.Message) {
	h := readHdrs(m, chanKeys)
	uid, name := h.v[hUniqueid], h.v[hChannel]
	if uid == "" || name == "" || e.tombs.has(uid) {
		e.stats.Unknown++ // hangup seen before, or nothing to key it by
		return
	}
	if c := e.chans[uid]; c != nil {
		e.stats.Unknown++ // duplicate
		e.updateFrom(c, &h)
		return
	}
	if old := e.byName[name]; old != nil {
		// Same name, new Uniqueid: the old one missed its Hangup.
		e.dropChannel(old)
	}
	c := e.newChannelFrom(&h, uid, name)
	if c.state == stateRinging {
		e.noteRinging(c)
	}
}

// onNewstate handles Newstate, NewCallerid, NewConnectedLine and
// NewAccountCode (ev).
func (e *Engine) onNewstate(m ami.Message, ev string) {
	h := readHdrs(m, chanKeys)
	c := e.chanOfHdrs(&h)
	if c == nil {
		return
	}
	e.updateFrom(c, &h)
	if ev == ami.EventNewAccountCode {
		if v := h.v[hAccountCode]; v != c.get().account {
			c.more().account = strings.Clone(v)
		}
	}
}

func (e *Engine) onHangup(m ami.Message) {
	uid := m.Get("Uniqueid")
	c := e.chanBy(uid, m.Get("Channel"))
	e.tombs.add(uid)
	if c == nil {
		e.stats.Unknown++
		return
	}
	if c.uid != uid {
		e.tombs.add(c.uid) // found by name
	}
	if c.kind == ownerExt {
		e.keepCause(c.uid, m.Get("Cause"))
	}
	e.dropChannel(c)
}

// keepCause keeps an extension channel's Hangup cause until the next
// Publish tells it (Change.Hangups).
func (e *Engine) keepCause(uid, cause string) {
	n, err := strconv.Atoi(cause)
	if err != nil || n < 0 {
		n = -1
	}
	if e.causes == nil {
		e.causes = map[string]int{}
	}
	e.causes[uid] = n
}

func (e *Engine) onHold(m ami.Message, on bool) {
	h := readHdrs(m, chanKeys)
	if c := e.chanOfHdrs(&h); c != nil {
		e.updateFrom(c, &h)
		c.hold = on
	}
}

func (e *Engine) onMixMonitor(m ami.Message, ev string) {
	c := e.chanOf(m)
	if c == nil {
		return
	}
	switch ev {
	case ami.EventMixMonitorStart:
		c.recording = "true"
	case ami.EventMixMonitorStop:
		c.recording = "false"
	case ami.EventMixMonitorMute:
		if s := m.Get("State"); s == "1" || strings.EqualFold(s, "yes") || strings.EqualFold(s, "on") {
			c.recording = "mute"
		} else {
			c.recording = "true"
		}
	}
	e.changed(c)
}

// onPickup: the picking channel answers a call ringing elsewhere; for its
// owner it is an incoming call from whoever called the target.
func (e *Engine) onPickup(m ami.Message) {
	c := e.chanOf(m)
	if c == nil {
		return
	}
	c.pickup = true
	if t := e.chanBy(m.Get("TargetUniqueid"), m.Get("TargetChannel")); t != nil {
		if t.dialledBy != nil {
			c.dialledBy = t.dialledBy
		}
		c.viaTrunk = c.viaTrunk || t.viaTrunk
		if c.queue == "" {
			c.queue = t.queue
		}
	}
	e.changed(c)
}

// onTransfer handles BlindTransfer and AttendedTransfer (ev); besides the
// attended transfer's end (transfer.go), it only refreshes the parties: the
// bridge, dial and connected line events around a transfer carry the
// actual change.
func (e *Engine) onTransfer(m ami.Message, ev string) {
	if ev == ami.EventAttendedTransfer {
		e.onAttendedTransfer(m)
	}
	e.touchTransferParties(m)
}

func (e *Engine) touchTransferParties(m ami.Message) {
	for _, k := range [...][2]string{
		{"TransfererUniqueid", "TransfererChannel"},
		{"TransfereeUniqueid", "TransfereeChannel"},
		{"OrigTransfererUniqueid", "OrigTransfererChannel"},
		{"SecondTransfererUniqueid", "SecondTransfererChannel"},
		{"TransferTargetUniqueid", "TransferTargetChannel"},
	} {
		if c := e.chanBy(m.Get(k[0]), m.Get(k[1])); c != nil {
			e.changed(c)
		}
	}
}

func (e *Engine) onLocal(m ami.Message) {
	one := e.chanBy(m.Get("LocalOneUniqueid"), m.Get("LocalOneChannel"))
	two := e.chanBy(m.Get("LocalTwoUniqueid"), m.Get("LocalTwoChannel"))
	if one == nil || two == nil {
		e.stats.Unknown++
		return
	}
	one.partner, two.partner = two, one
	e.changed(one)
	e.changed(two)
}

func (e *Engine) onConfbridge(m ami.Message, join bool) {
	c := e.chanOf(m)
	if c == nil {
		return
	}
	e.updateCommon(c, m)
	c.conference = join
	if join && c.answeredAt == 0 {
		c.answeredAt = e.nowMs()
	}
}
