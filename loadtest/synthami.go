package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// SynthAMI is a synthetic Asterisk on loopback for `loadtest synth`: an
// ami.Server that knows Extensions PJSIP endpoints (2000, 2001, ...,
// registered), emits the AMI events of two-party calls between them as
// Asterisk 22 does (Newchannel, Newstate, DialBegin/End, BridgeCreate,
// BridgeEnter/Leave, Hangup, ExtensionStatus, with Uniqueid and Linkedid
// as in calls/testdata) when told to Dial, Answer and Hangup, and answers
// a bridge's resynchronisation and reconcile lists (CoreShowChannels,
// PJSIPShowEndpoints, PJSIPShowContacts, ExtensionStateList,
// DeviceStateList; QueueStatus and ParkedCalls empty) from the calls it
// has up. Other actions get Asterisk's "Invalid/unknown command" error,
// which the bridge treats as a module not loaded.
//
// Its methods are safe for concurrent use; events and list answers are
// built under one lock, so a list never disagrees with the events sent
// before it.
type SynthAMI struct {
	srv   *ami.Server
	ln    net.Listener
	exts  int
	epoch int64

	mu     sync.Mutex
	seq    int                 // channels created: names and Uniqueids
	chans  map[string]*synChan // up, by Uniqueid
	status []int               // ExtensionStatus of each extension (0 idle, 1 in use, 8 ringing)
	events uint64              // events broadcast
}

// synChan is one channel as CoreShowChannels lists it.
type synChan struct {
	name, uid, linked, num, conn, exten, bridge, app string
	state, seq                                       int
	created                                          time.Time
}

// SynthCall is a call between two extensions placed by Dial.
type SynthCall struct {
	A, B   int // extension indexes: caller, callee
	ca, cb *synChan
	bridge string
}

// SynthExten is the number of extension i.
func SynthExten(i int) string { return strconv.Itoa(2000 + i) }

// NewSynthAMI listens on addr (127.0.0.1:0) for a manager login as
// user/secret and serves until ctx ends or Close.
func NewSynthAMI(ctx context.Context, addr string, exts int, user, secret string, log *slog.Logger) (*SynthAMI, error) {
	if exts < 2 {
		return nil, errors.New("loadtest: synth: at least 2 extensions")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &SynthAMI{ln: ln, exts: exts, epoch: time.Now().Unix(), chans: map[string]*synChan{}, status: make([]int, exts)}
	// A burst of thousands of calls is queued, never a reason to drop
	// the bridge.
	s.srv = ami.NewServer(ami.ServerConfig{Users: map[string]string{user: secret}, Log: log, QueueSize: 1 << 21})
	s.srv.Handle(ami.ActionCoreShowChannels, s.coreShowChannels)
	s.srv.Handle(ami.ActionPJSIPShowEndpoints, s.endpoints)
	s.srv.Handle(ami.ActionPJSIPShowContacts, s.contacts)
	s.srv.Handle(ami.ActionExtensionStateList, s.extensionStates)
	s.srv.Handle(ami.ActionDeviceStateList, s.deviceStates)
	s.srv.Handle(ami.ActionQueueStatus, emptyList("Queue status will follow", ami.EventQueueStatusComplete))
	s.srv.Handle(ami.ActionParkedCalls, emptyList("Parked calls will follow", ami.EventParkedCallsComplete))
	go s.srv.Serve(ln)
	go func() {
		<-ctx.Done()
		s.srv.Close()
	}()
	return s, nil
}

// Addr is the manager address (host:port).
func (s *SynthAMI) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *SynthAMI) Close() error { return s.srv.Close() }

// Events is how many events were broadcast so far.
func (s *SynthAMI) Events() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

// Dial starts a call from extension a to b: a's channel dials b's, which
// rings. It returns once the events are queued to the bridge.
func (s *SynthAMI) Dial(a, b int) *SynthCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	an, bn := SynthExten(a), SynthExten(b)
	c := &SynthCall{A: a, B: b}
	c.ca = s.newChan(an, an, bn)
	c.ca.state, c.ca.app = 4, "Dial"
	c.cb = s.newChan(bn, c.ca.linked, "s")
	c.cb.conn, c.cb.app = an, "AppDial"
	s.emit(chanEv(ami.EventNewchannel, c.ca))
	s.emit(chanEv(ami.EventVarSet, c.ca, "Variable", "SIPCALLID", "Value", c.ca.uid+"@synth"))
	s.emit(chanEv(ami.EventNewexten, c.ca, "Extension", bn, "Application", "Dial", "AppData", "PJSIP/"+bn+",,Tt"))
	s.emit(chanEv(ami.EventNewchannel, c.cb))
	s.emit(dialEv(ami.EventDialBegin, c, "DialString", bn))
	c.cb.state = 5
	s.emit(chanEv(ami.EventNewstate, c.cb))
	s.setStatus(b, 8)
	return c
}

// Answer has the callee answer: both channels up and bridged.
func (s *SynthAMI) Answer(c *SynthCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.cb.state = 6
	s.emit(chanEv(ami.EventNewstate, c.cb))
	s.emit(dialEv(ami.EventDialEnd, c, "DialStatus", "ANSWER"))
	c.ca.state, c.ca.conn = 6, c.cb.num
	s.emit(chanEv(ami.EventNewstate, c.ca))
	c.bridge = "synth-bridge-" + c.ca.uid
	s.emit(ev(ami.EventBridgeCreate, "BridgeUniqueid", c.bridge, "BridgeType", "basic", "BridgeTechnology", "simple_bridge",
		"BridgeCreator", "<unknown>", "BridgeName", "<unknown>", "BridgeNumChannels", "0"))
	for i, ch := range []*synChan{c.cb, c.ca} {
		ch.bridge = c.bridge
		s.emit(chanEv(ami.EventBridgeEnter, ch, "BridgeUniqueid", c.bridge, "BridgeType", "basic",
			"BridgeTechnology", "simple_bridge", "BridgeNumChannels", strconv.Itoa(i+1)))
	}
	s.setStatus(c.A, 1)
	s.setStatus(c.B, 1)
}

// Hangup ends the call (answered or still ringing): the caller hangs up.
func (s *SynthAMI) Hangup(c *SynthCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.bridge != "" {
		for i, ch := range []*synChan{c.ca, c.cb} {
			ch.bridge = ""
			s.emit(chanEv(ami.EventBridgeLeave, ch, "BridgeUniqueid", c.bridge, "BridgeType", "basic",
				"BridgeTechnology", "simple_bridge", "BridgeNumChannels", strconv.Itoa(1-i)))
		}
		s.emit(ev(ami.EventBridgeDestroy, "BridgeUniqueid", c.bridge, "BridgeType", "basic", "BridgeTechnology", "simple_bridge"))
	} else {
		s.emit(dialEv(ami.EventDialEnd, c, "DialStatus", "CANCEL"))
	}
	for _, ch := range []*synChan{c.cb, c.ca} {
		s.emit(chanEv(ami.EventHangup, ch, "Cause", "16", "Cause-txt", "Normal Clearing"))
		delete(s.chans, ch.uid)
	}
	s.setStatus(c.A, 0)
	s.setStatus(c.B, 0)
}

// newChan creates extension num's next channel, linked to linked (its
// own Uniqueid when empty).
func (s *SynthAMI) newChan(num, linked, exten string) *synChan {
	s.seq++
	uid := fmt.Sprintf("%d.%d", s.epoch, s.seq)
	if linked == num {
		linked = uid
	}
	ch := &synChan{name: fmt.Sprintf("PJSIP/%s-%08x", num, s.seq), uid: uid, linked: linked, num: num,
		exten: exten, seq: s.seq, created: time.Now()}
	s.chans[uid] = ch
	return ch
}

var stateDesc = map[int]string{0: "Down", 4: "Ring", 5: "Ringing", 6: "Up"}

func orUnknown(v string) string {
	if v == "" {
		return "<unknown>"
	}
	return v
}

// chanHeaders are a channel's snapshot headers, as in every channel event.
func chanHeaders(hs []ami.Header, prefix string, c *synChan) []ami.Header {
	return append(hs,
		ami.Header{Key: prefix + "Channel", Value: c.name},
		ami.Header{Key: prefix + "ChannelState", Value: strconv.Itoa(c.state)},
		ami.Header{Key: prefix + "ChannelStateDesc", Value: stateDesc[c.state]},
		ami.Header{Key: prefix + "CallerIDNum", Value: c.num},
		ami.Header{Key: prefix + "CallerIDName", Value: "User " + c.num},
		ami.Header{Key: prefix + "ConnectedLineNum", Value: orUnknown(c.conn)},
		ami.Header{Key: prefix + "ConnectedLineName", Value: "<unknown>"},
		ami.Header{Key: prefix + "Language", Value: "en"},
		ami.Header{Key: prefix + "AccountCode", Value: ""},
		ami.Header{Key: prefix + "Context", Value: "from-internal"},
		ami.Header{Key: prefix + "Exten", Value: c.exten},
		ami.Header{Key: prefix + "Priority", Value: "1"},
		ami.Header{Key: prefix + "Uniqueid", Value: c.uid},
		ami.Header{Key: prefix + "Linkedid", Value: c.linked},
	)
}

func chanEv(name string, c *synChan, kv ...string) ami.Message {
	hs := make([]ami.Header, 0, 18+len(kv)/2)
	hs = append(hs, ami.Header{Key: "Event", Value: name}, ami.Header{Key: "Privilege", Value: "call,all"})
	hs = chanHeaders(hs, "", c)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

// dialEv is a DialBegin or DialEnd: the caller's headers, then the
// callee's as Dest*.
func dialEv(name string, c *SynthCall, kv ...string) ami.Message {
	hs := make([]ami.Header, 0, 34)
	hs = append(hs, ami.Header{Key: "Event", Value: name}, ami.Header{Key: "Privilege", Value: "call,all"})
	hs = chanHeaders(hs, "", c.ca)
	hs = chanHeaders(hs, "Dest", c.cb)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

func ev(name string, kv ...string) ami.Message {
	hs := make([]ami.Header, 0, 2+len(kv)/2)
	hs = append(hs, ami.Header{Key: "Event", Value: name}, ami.Header{Key: "Privilege", Value: "call,all"})
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

func (s *SynthAMI) emit(m ami.Message) {
	s.events++
	s.srv.Broadcast(m)
}

var extStatusText = map[int]string{0: "Idle", 1: "InUse", 8: "Ringing", 9: "InUse&Ringing"}

// setStatus changes extension i's hint state and says so.
func (s *SynthAMI) setStatus(i, st int) {
	s.status[i] = st
	s.emit(ami.NewMessage(s.statusHeaders(ami.EventExtensionStatus, i)...))
}

func (s *SynthAMI) statusHeaders(event string, i int) []ami.Header {
	x := SynthExten(i)
	return []ami.Header{{Key: "Event", Value: event}, {Key: "Privilege", Value: "call,all"}, {Key: "Exten", Value: x},
		{Key: "Context", Value: "ext-local"}, {Key: "Hint", Value: "PJSIP/" + x}, {Key: "Status", Value: strconv.Itoa(s.status[i])},
		{Key: "StatusText", Value: extStatusText[s.status[i]]}}
}

func emptyList(startMsg, complete string) ami.HandlerFunc {
	return func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
		return pbxsim.EventList(req, startMsg, complete, nil)
	}
}

func (s *SynthAMI) coreShowChannels(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	chans := make([]*synChan, 0, len(s.chans))
	for _, c := range s.chans {
		chans = append(chans, c)
	}
	slices.SortFunc(chans, func(a, b *synChan) int { return a.seq - b.seq })
	items := make([]ami.Message, 0, len(chans))
	for _, c := range chans {
		hs := chanHeaders([]ami.Header{{Key: "Event", Value: ami.EventCoreShowChannel}}, "", c)
		hs = append(hs, ami.Header{Key: "Application", Value: c.app}, ami.Header{Key: "ApplicationData", Value: ""},
			ami.Header{Key: "Duration", Value: fmtHMS(time.Since(c.created))}, ami.Header{Key: "BridgeId", Value: c.bridge})
		items = append(items, ami.NewMessage(hs...))
	}
	return pbxsim.EventList(req, "Channels will follow", ami.EventCoreShowChannelsComplete, items)
}

func fmtHMS(d time.Duration) string {
	t := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", t/3600, t/60%60, t%60)
}

func (s *SynthAMI) endpoints(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]ami.Message, 0, s.exts)
	for i := range s.exts {
		x := SynthExten(i)
		dev := "Not in use"
		if s.status[i] != 0 {
			dev = "In use"
		}
		items = append(items, pbxsim.Item(ami.EventEndpointList, "ObjectType", "endpoint", "ObjectName", x, "Transport", "transport-udp",
			"Aor", x, "Auths", x, "OutboundAuths", "", "Contacts", x+"/sip:"+x+"@127.0.0.1:5062,", "DeviceState", dev, "ActiveChannels", ""))
	}
	return pbxsim.EventList(req, "A listing of Endpoints follows, presented as EndpointList events", ami.EventEndpointListComplete, items)
}

func (s *SynthAMI) contacts(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	items := make([]ami.Message, 0, s.exts)
	for i := range s.exts {
		x := SynthExten(i)
		items = append(items, pbxsim.Item(ami.EventContactList, "ObjectType", "contact", "ObjectName", x+";@synth", "ViaAddr", "127.0.0.1",
			"CallId", "synth-"+x, "Endpoint", x, "ViaPort", "5062", "Uri", "sip:"+x+"@127.0.0.1:5062", "UserAgent", "synth",
			"Status", "NonQualified", "RoundtripUsec", "N/A"))
	}
	return pbxsim.EventList(req, "A listing of Contacts follows, presented as ContactList events", ami.EventContactListComplete, items)
}

func (s *SynthAMI) extensionStates(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]ami.Message, 0, s.exts)
	for i := range s.exts {
		hs := s.statusHeaders(ami.EventExtensionStatus, i)
		items = append(items, ami.NewMessage(append(hs[:1:1], hs[2:]...)...)) // list items carry no Privilege
	}
	return pbxsim.EventList(req, "Extension Statuses will follow", ami.EventExtensionStateListComplete, items)
}

func (s *SynthAMI) deviceStates(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]ami.Message, 0, s.exts)
	for i := range s.exts {
		st := "NOT_INUSE"
		switch s.status[i] {
		case 1:
			st = "INUSE"
		case 8:
			st = "RINGING"
		}
		items = append(items, pbxsim.Item(ami.EventDeviceStateChange, "Device", "PJSIP/"+SynthExten(i), "State", st))
	}
	return pbxsim.EventList(req, "Device State Changes will follow", ami.EventDeviceStateListComplete, items)
}
