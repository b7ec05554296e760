package pbxsim

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
	"github.com/emiago/sipgo"
)

// Channel states as Asterisk numbers them (ChannelState in events).
const (
	stateDown    = 0
	stateRing    = 4
	stateRinging = 5
	stateUp      = 6
)

// channel is one Asterisk channel. Its fields are guarded by PBX.mu; the
// call that owns it is the only writer.
type channel struct {
	call     *call
	name     string // PJSIP/201-0000000a
	endpoint string // 201, or the trunk name
	uniqueid string
	linkedid string

	state           int
	cidNum, cidName string
	conNum, conName string
	accountCode     string
	recFile         string // CDR(recordingfile), set by the dialplan's MixMonitor
	context, exten  string
	priority        int
	app, appData    string
	sipHeaders      extraHeaders // added to its INVITE (an Originate's PJSIP_HEADER)

	created, answered time.Time
	bridge            *bridge
	progressed        bool // an outgoing caller whose callee answered or rings: counts as in use
	onHold            bool // hears music on hold (its peer put the call on hold)
	parkSpace         int  // 701.. while parked
	parkedAt          time.Time
	parker            string     // ParkerDialString
	gone              bool       // Hangup emitted
	byeRecv           bool       // its side ended the dialog (BYE received)
	byeSent           bool       // we ended (or refused) its dialog
	noAck             bool       // our 2xx was never acknowledged (64*T1): its Hangup is 18/408
	srvAnswered       bool       // our 2xx to its INVITE is sent
	spies             []*channel // ChanSpy channels listening to this one
	dialplan          bool       // runs a dialplan (an inbound caller, an originated channel), unlike a dialled one
	partyA            bool       // owns the Cdr of its bridge with another dialplan channel (a retrieved parked call)
	dialled, dialData string     // what its last Dial dialled and the Dial's data, for its Cdrs
	did               string     // the number a trunk caller dialled (freepbx plan)
	dialler           *channel   // the channel whose Dial created this one (pickup)
	cdrStart          time.Time  // when its current CDR began (zero: created), after a transfer
	cdrParts          []cdrPart  // CDRs of its calls before a transfer, emitted with its last one

	// SIP side: exactly one of srv (the caller's dialog, we are UAS), cli
	// (a dialog we started, we are UAC) or neither (a channel without SIP).
	srv       *sipgo.DialogServerSession
	srvQ      chan func(context.Context) // srv's operations, run one at a time (see call.srvDo)
	cli       *sipgo.DialogClientSession
	cancelCli func() // cancels an unanswered outgoing INVITE (sends CANCEL)
	tcp       bool
	dialogID  string
	sdp       []byte // the session description this side offered or answered
	sdpSent   []byte // the last one we sent it (offer, answer), for o= versioning
}

// cdrPart is a finished segment of a channel's call that Asterisk reports
// as its own Cdr when the channel hangs up (a blind transfer splits the
// caller's call in two, blind_transfer_redirect recording).
type cdrPart struct {
	destCh, data       string
	start, answer, end time.Time
	disposition        string // "" is ANSWERED
	app                string // "" is Dial
}

// bridge is a basic (or parking) bridge.
type bridge struct {
	id      string
	typ     string // basic | parking
	tech    string // simple_bridge | holding_bridge
	creator string
	name    string
	chans   []*channel
	hidden  int // channels in it that AMI does not show (a conference's announcer)
}

func newBridgeID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// snap is c's snapshot as its events show it.
func (c *channel) snap() amievent.Channel {
	return amievent.Channel{Name: c.name, State: c.state, Num: c.cidNum, CIDName: c.cidName, Conn: c.conNum, ConnName: c.conName,
		Account: c.accountCode, Context: c.context, Exten: c.exten, Priority: c.priority, UID: c.uniqueid, Linked: c.linkedid}
}

// chanHeaders appends c's snapshot block, every key prefixed (Dest,
// Parkee, Transferer, ...) as Asterisk does.
func chanHeaders(hs []ami.Header, prefix string, c *channel) []ami.Header {
	s := c.snap()
	return amievent.AppendChannel(hs, prefix, &s)
}

func (b *bridge) snap() amievent.Bridge {
	return amievent.Bridge{ID: b.id, Type: b.typ, Tech: b.tech, Creator: b.creator, Name: b.name, Channels: len(b.chans) + b.hidden}
}

func bridgeHeaders(hs []ami.Header, prefix string, b *bridge) []ami.Header {
	s := b.snap()
	return amievent.AppendBridge(hs, prefix, &s)
}

// chanEvent builds an event made of the channel block plus extra pairs.
func chanEvent(name string, c *channel, kv ...string) ami.Message {
	s := c.snap()
	return amievent.ChannelEvent(name, &s, kv...)
}

// setAccountCode gives ch the account code code. A change is reported
// as Asterisk's manager_channels reports it from the channel's next
// snapshot (channel_new_accountcode): NewAccountCode with the channel as
// it is now and OldAccountCode; callers emit it where that snapshot's
// other events go (after Newstate, before NewConnectedLine). p.mu held.
func (p *PBX) setAccountCode(ch *channel, code string) {
	if ch.accountCode == code {
		return
	}
	old := ch.accountCode
	ch.accountCode = code
	p.emit(chanEvent(ami.EventNewAccountCode, ch, "OldAccountCode", old))
}

// dialEvent builds DialBegin/DialState/DialEnd. src may be nil (Originate).
func dialEvent(name string, src, dst *channel, kv ...string) ami.Message {
	d := dst.snap()
	if src == nil {
		return amievent.DialEvent(name, nil, &d, kv...)
	}
	s := src.snap()
	return amievent.DialEvent(name, &s, &d, kv...)
}

func bridgeEvent(name string, b *bridge, c *channel) ami.Message {
	s := b.snap()
	if c == nil {
		return amievent.BridgeEvent(name, &s, nil)
	}
	cs := c.snap()
	return amievent.BridgeEvent(name, &s, &cs)
}

// causeText is Asterisk's ast_cause2str for the causes pbxsim uses.
func causeText(cause int) string {
	switch cause {
	case 0:
		return "Unknown"
	case 1:
		return "Unallocated (unassigned) number"
	case 16:
		return "Normal Clearing"
	case 17:
		return "User busy"
	case 18:
		return "No user responding"
	case 19:
		return "User alerting, no answer"
	case 20:
		return "Subscriber absent"
	case 21:
		return "Call Rejected"
	case 26:
		return "Answered elsewhere"
	case 34:
		return "Circuit/channel congestion"
	case 38:
		return "Network out of order"
	case 127:
		return "Interworking, unspecified"
	}
	return "Unknown"
}

// sipToCause maps a final SIP failure response to a Q.850 cause as
// chan_pjsip's hangup_sip2cause does.
func sipToCause(code int) int {
	switch code {
	case 404, 484:
		return 1
	case 486, 600:
		return 17
	case 408:
		return 18
	case 480, 487:
		return 19
	case 403, 603:
		return 21
	case 503:
		return 34
	case 500, 501, 502:
		return 38
	}
	if code >= 400 {
		return 127
	}
	return 16
}

// dialStatus is the DialEnd status for a callee that failed with cause.
func dialStatus(cause int) string {
	switch cause {
	case 17:
		return "BUSY"
	case 16, 18, 19:
		return "NOANSWER"
	case 34:
		return "CONGESTION"
	}
	return "CHANUNAVAIL"
}

// causeToSIP is the response sent to a caller whose call ends with cause
// before being answered: chan_pjsip's hangup_cause2sip, and for a cause
// it has no code for (16 among them: a ringing callee hung up through
// AMI) res_pjsip_session's default when it ends a session, 603 Decline.
func causeToSIP(cause int) (int, string) {
	switch cause {
	case 23:
		return 302, "Moved Temporarily"
	case 1, 2, 3:
		return 404, "Not Found"
	case 18:
		return 408, "Request Timeout"
	case 19, 20, 31:
		return 480, "Temporarily Unavailable"
	case 21:
		return 403, "Forbidden"
	case 22:
		return 410, "Gone"
	case 28:
		return 484, "Address Incomplete"
	case 17:
		return 486, "Busy Here"
	case 58:
		return 488, "Not Acceptable Here"
	case 38, 127:
		return 500, "Server Internal Error"
	case 29:
		return 501, "Not Implemented"
	case 27:
		return 502, "Bad Gateway"
	case 34, 42, 66:
		return 503, "Service Unavailable"
	}
	return 603, "Decline"
}

// Device states (DeviceStateChange State) and extension states
// (ExtensionStatus Status and StatusText), as Asterisk names them.
type devState int

const (
	devNotInUse devState = iota
	devInUse
	devUnavailable
	devRinging
	devRingInUse
	devOnHold
)

func (d devState) device() string {
	return [...]string{"NOT_INUSE", "INUSE", "UNAVAILABLE", "RINGING", "RINGINUSE", "ONHOLD"}[d]
}

func (d devState) extStatus() (int, string) {
	switch d {
	case devInUse:
		return 1, "InUse"
	case devUnavailable:
		return 4, "Unavailable"
	case devRinging:
		return 8, "Ringing"
	case devRingInUse:
		return 9, "InUse&Ringing"
	case devOnHold:
		return 16, "Hold"
	}
	return 0, "Idle"
}

// endpointState is PJSIPShowEndpoints' DeviceState text.
func (d devState) endpointState() string {
	return [...]string{"Not in use", "In use", "Unavailable", "Ringing", "Ringing in use", "On Hold"}[d]
}

func fmtDuration(d time.Duration) string {
	s := int(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}
