package loadtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// SynthAMI is a synthetic Asterisk on loopback for `loadtest synth`: an
// ami.Server in front of a synthpbx.PBX (Extensions PJSIP endpoints
// 2000, 2001, ..., registered; Queues queues of Members static members
// each, the first extensions), sending the events of the calls a
// synthpbx.Gen places on it (internal, trunk, queue and transferred
// calls, as Asterisk 22 sends them: synthpbx's doc), and answering a
// bridge's resynchronisation and reconcile lists (CoreShowChannels,
// PJSIPShowEndpoints, PJSIPShowContacts, ExtensionStateList,
// DeviceStateList, QueueStatus; ParkedCalls empty) from the PBX's state.
// Other actions get Asterisk's "Invalid/unknown command" error, which the
// bridge treats as a module not loaded.
//
// Its methods are safe for concurrent use; events and list answers are
// built under one lock, so a list never disagrees with the events sent
// before it.
type SynthAMI struct {
	srv *ami.Server
	ln  net.Listener
	cfg SynthPBX

	mu  sync.Mutex
	pbx *synthpbx.PBX
}

// SynthPBX is the synthetic PBX's size.
type SynthPBX struct {
	Extensions int
	Queues     int // queues q1, q2, ... (dialled 601, 602, ...)
	Members    int // static members of each queue
}

// NewSynthAMI listens on addr (127.0.0.1:0) for a manager login as
// user/secret and serves until ctx ends or Close.
func NewSynthAMI(ctx context.Context, addr string, cfg SynthPBX, user, secret string, log *slog.Logger) (*SynthAMI, error) {
	s := &SynthAMI{cfg: cfg}
	pbx, err := synthpbx.New(cfg.Extensions, cfg.Queues, cfg.Members, func(m ami.Message) { s.srv.Broadcast(m) }, nil)
	if err != nil {
		return nil, fmt.Errorf("loadtest: synth: %w", err)
	}
	s.pbx = pbx
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	// A burst of thousands of calls is queued, never a reason to drop
	// the bridge.
	s.srv = ami.NewServer(ami.ServerConfig{Users: map[string]string{user: secret}, Log: log, QueueSize: 1 << 21})
	s.srv.Handle(ami.ActionCoreShowChannels, s.coreShowChannels)
	s.srv.Handle(ami.ActionPJSIPShowEndpoints, s.endpoints)
	s.srv.Handle(ami.ActionPJSIPShowContacts, s.contacts)
	s.srv.Handle(ami.ActionExtensionStateList, s.extensionStates)
	s.srv.Handle(ami.ActionDeviceStateList, s.deviceStates)
	s.srv.Handle(ami.ActionQueueStatus, s.queueStatus)
	s.srv.Handle(ami.ActionParkedCalls, func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
		return pbxsim.EventList(req, "Parked calls will follow", ami.EventParkedCallsComplete, nil)
	})
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
	return s.pbx.Events()
}

// do runs f on the PBX under the lock: whatever f makes the PBX emit is
// queued to the bridges before a list answer can be built.
func (s *SynthAMI) do(f func(*synthpbx.PBX)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.pbx)
}

func (s *SynthAMI) coreShowChannels(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	chans := s.pbx.Chans()
	items := make([]ami.Message, 0, len(chans))
	for _, c := range chans {
		hs := amievent.AppendChannel([]ami.Header{{Key: "Event", Value: ami.EventCoreShowChannel}}, "", &c.Channel)
		hs = append(hs, ami.Header{Key: "Application", Value: c.App}, ami.Header{Key: "ApplicationData", Value: ""},
			ami.Header{Key: "Duration", Value: fmtHMS(time.Since(c.Created))}, ami.Header{Key: "BridgeId", Value: c.Bridge})
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
	items := make([]ami.Message, 0, s.cfg.Extensions)
	for i := range s.cfg.Extensions {
		x := synthpbx.Exten(i)
		dev := "Not in use"
		if s.pbx.Status(i) != 0 {
			dev = "In use"
		}
		items = append(items, pbxsim.Item(ami.EventEndpointList, "ObjectType", "endpoint", "ObjectName", x, "Transport", "transport-udp",
			"Aor", x, "Auths", x, "OutboundAuths", "", "Contacts", x+"/sip:"+x+"@127.0.0.1:5062,", "DeviceState", dev, "ActiveChannels", ""))
	}
	return pbxsim.EventList(req, "A listing of Endpoints follows, presented as EndpointList events", ami.EventEndpointListComplete, items)
}

func (s *SynthAMI) contacts(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	items := make([]ami.Message, 0, s.cfg.Extensions)
	for i := range s.cfg.Extensions {
		x := synthpbx.Exten(i)
		items = append(items, pbxsim.Item(ami.EventContactList, "ObjectType", "contact", "ObjectName", x+";@synth", "ViaAddr", "127.0.0.1",
			"CallId", "synth-"+x, "Endpoint", x, "ViaPort", "5062", "Uri", "sip:"+x+"@127.0.0.1:5062", "UserAgent", "synth",
			"Status", "NonQualified", "RoundtripUsec", "N/A"))
	}
	return pbxsim.EventList(req, "A listing of Contacts follows, presented as ContactList events", ami.EventContactListComplete, items)
}

func (s *SynthAMI) extensionStates(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]ami.Message, 0, s.cfg.Extensions)
	for i := range s.cfg.Extensions {
		items = append(items, ami.NewMessage(s.pbx.StatusHeaders(ami.EventExtensionStatus, i, false)...))
	}
	return pbxsim.EventList(req, "Extension Statuses will follow", ami.EventExtensionStateListComplete, items)
}

func (s *SynthAMI) deviceStates(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]ami.Message, 0, s.cfg.Extensions)
	for i := range s.cfg.Extensions {
		st := "NOT_INUSE"
		switch s.pbx.Status(i) {
		case 1:
			st = "INUSE"
		case 8:
			st = "RINGING"
		case 16:
			st = "ONHOLD"
		}
		items = append(items, pbxsim.Item(ami.EventDeviceStateChange, "Device", "PJSIP/"+synthpbx.Exten(i), "State", st))
	}
	return pbxsim.EventList(req, "Device State Changes will follow", ami.EventDeviceStateListComplete, items)
}

// queueStatus lists every queue as app_queue does (status_actions_during_call):
// its QueueParams, its members, its callers waiting.
func (s *SynthAMI) queueStatus(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var items []ami.Message
	now := time.Now().Unix()
	for _, q := range s.pbx.Queues() {
		items = append(items, pbxsim.Item(ami.EventQueueParams, "Queue", q.Name, "Max", "0", "Strategy", "ringall",
			"Calls", strconv.Itoa(len(q.Waiting)), "Holdtime", strconv.Itoa(q.HoldTime), "TalkTime", strconv.Itoa(q.TalkTime),
			"Completed", strconv.Itoa(q.Completed), "Abandoned", strconv.Itoa(q.Abandoned), "ServiceLevel", "0",
			"ServicelevelPerf", "0.0", "ServicelevelPerf2", "0.0", "Weight", "0"))
		for _, m := range q.Members {
			items = append(items, ami.NewMessage(s.pbx.MemberHeaders(q, m, ami.EventQueueMember, false)...))
		}
		for i, c := range q.Waiting {
			items = append(items, pbxsim.Item(ami.EventQueueEntry, "Queue", q.Name, "Position", strconv.Itoa(i+1), "Channel", c.Name,
				"Uniqueid", c.UID, "CallerIDNum", c.Num, "CallerIDName", c.CIDName, "ConnectedLineNum", "unknown",
				"ConnectedLineName", "unknown", "Wait", strconv.FormatInt(now-c.Created.Unix(), 10), "Priority", "0"))
		}
	}
	return pbxsim.EventList(req, "Queue status will follow", ami.EventQueueStatusComplete, items)
}
