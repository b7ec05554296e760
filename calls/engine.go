package calls

import (
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Engine turns AMI events into state. Only one goroutine may call its
// methods, except Snapshot and Feed, which any goroutine may call.
type Engine struct {
	engineState // Restart replaces it whole

	snap atomic.Pointer[Snapshot]
	feed *Feed
}

// engineState is everything of an Engine but its Feed and latest
// Snapshot, which readers hold on to: New builds it, Restart builds it
// again.
type engineState struct {
	// Immutable after New.
	cfg      Config
	now      func() time.Time
	trunkSet map[string]bool
	log      *slog.Logger

	// Owned by the engine goroutine.
	exts     map[string]*extState
	trunks   map[string]*trunkState
	queues   map[string]*queueState
	parks    map[string]*parkState
	confs    map[string]*confState
	chans    map[string]*channel // by Uniqueid
	byName   map[string]*channel // by channel name
	bridges  map[string]*bridge
	busyExt  map[string]*extState   // extensions that have channels
	busyTrk  map[string]*trunkState // trunks that have channels
	waitIn   map[string]int         // by channel name: how many queues have it waiting (queueState.waiting)
	inVM     int                    // channels running VoiceMail (chanMore.mailbox set)
	tombs    tombstones
	stats    Stats              // ByType unused: byType holds it
	byType   map[string]*uint64 // Stats.ByType's counters
	byCode   [nEvCodes]*uint64  // byType's counters of the names with a code, once counted (evcode.go)
	follow   followState
	presence map[string]string // published presence by extension
	chanSeq  uint64            // creation counter of channels

	link          LinkState
	linkSince     int64
	linkDirty     bool
	resync        resyncState
	reconMark     uint64 // first channel seq not judged by the pending Reconcile (BeginReconcile); 0 when not marked
	lastReconMark uint64 // the same, set by the previous Reconcile or EndResync

	// Dirty marks for the next Publish (dirty.go).
	touched     []*channel // channels changed in the batch, and those linked with them
	touchGen    uint64     // the batch's mark in channel.touched
	rederiveAll bool       // re-derive every owner with channels
	spiers      map[*channel]struct{}
	renamedExts map[string]struct{} // extensions whose display name changed
	devUser     map[string]string   // a device's user's extension (devices.go); nil until one
	userDevs    map[string][]string // a user's devices
	dirtyExt    map[string]struct{}
	dirtyTrunk  map[string]struct{}
	dirtyQueue  map[string]struct{}
	dirtyMember map[memberKey]struct{}
	dirtyPark   map[string]struct{}
	dirtyConf   map[string]struct{}
	ringing     []*channel // extension channels that started ringing
	// causes: the Hangup causes of the extensions' channels hung up
	// since the last Publish, by Uniqueid (Change.Hangups); nil until one.
	causes map[string]int

	version uint64
	durAt   int64 // ms of the last RefreshDurations that ran
	pub     published
	scratch []byte   // publishExts' encoding buffer
	extKeys []string // publishExts' sorted dirty extensions
	changes []Change
	// waitScratch is renumber's list of a queue's waiting callers.
	waitScratch []*QueueCaller
	// inSL holds the callers (by Uniqueid) an agent answered within their
	// queue's service level, until the call completes (AgentComplete) or
	// the channel goes.
	inSL map[string]*queueState
}

type memberKey struct{ queue, member string }

func newEngine(cfg Config) *Engine {
	e := &Engine{feed: newFeed(cfg.FeedSize)}
	e.init(cfg)
	e.snap.Store(e.pub.snapshot(e, 0, e.linkSince))
	return e
}

// init sets the engine's state to New's.
func (e *Engine) init(cfg Config) {
	e.engineState = engineState{
		cfg:         cfg,
		now:         cfg.Now,
		trunkSet:    map[string]bool{},
		log:         cfg.Log,
		exts:        map[string]*extState{},
		trunks:      map[string]*trunkState{},
		queues:      map[string]*queueState{},
		parks:       map[string]*parkState{},
		confs:       map[string]*confState{},
		chans:       map[string]*channel{},
		byName:      map[string]*channel{},
		bridges:     map[string]*bridge{},
		busyExt:     map[string]*extState{},
		busyTrk:     map[string]*trunkState{},
		waitIn:      map[string]int{},
		tombs:       newTombstones(4096),
		dirtyExt:    map[string]struct{}{},
		dirtyTrunk:  map[string]struct{}{},
		dirtyQueue:  map[string]struct{}{},
		dirtyMember: map[memberKey]struct{}{},
		dirtyPark:   map[string]struct{}{},
		presence:    map[string]string{},
		dirtyConf:   map[string]struct{}{},
		touchGen:    1,
		spiers:      map[*channel]struct{}{},
		renamedExts: map[string]struct{}{},
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e.byType = map[string]*uint64{}
	for _, t := range cfg.Trunks {
		e.trunkSet[t] = true
		e.ensureTrunk(t)
	}
	for num, name := range cfg.Names {
		x := e.ensureExt(num)
		x.name = name
		x.status = "offline"
	}
	for _, dev := range sortedKeys(cfg.Devices) {
		e.setDevice(dev, cfg.Devices[dev])
	}
	e.pub = newPublished()
	e.linkSince = e.nowMs()
}

// nowMs is the clock in ms since the epoch; a clock that knows no time yet
// (a replay before its first timestamp) reads 0, not year 1.
func (e *Engine) nowMs() int64 {
	t := e.now()
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// maxTypes bounds Stats.ByType against a peer inventing event names.
const maxTypes = 512

func (e *Engine) count(ev string, code evCode) {
	e.stats.Events++
	if n := e.byCode[code]; n != nil {
		*n++
		return
	}
	n := e.byType[ev]
	if n == nil {
		if len(e.byType) >= maxTypes {
			return
		}
		n = new(uint64)
		e.byType[strings.Clone(ev)] = n
	}
	if code != evOther {
		e.byCode[code] = n
	}
	*n++
}

func (e *Engine) apply(m ami.Message) {
	ev := m.Event()
	if ev == "" {
		return
	}
	code := evCodeOf(ev)
	e.count(ev, code)
	e.resync.events++
	if e.resync.active {
		e.keepForList(m, ev)
	}
	switch code {
	// Channels and conversations.
	case evNewchannel:
		e.onNewchannel(m)
	case evNewstate, evNewCallerid, evNewConnectedLine, evNewAccountCode:
		e.onNewstate(m, ev)
	case evDialBegin:
		e.onDialBegin(m)
	case evDialState:
		e.onDialState(m)
	case evDialEnd:
		e.onDialEnd(m)
	case evBridgeCreate:
		e.onBridgeCreate(m)
	case evBridgeEnter:
		e.onBridgeEnter(m)
	case evBridgeLeave:
		e.onBridgeLeave(m)
	case evBridgeDestroy:
		e.onBridgeDestroy(m)
	case evBridgeMerge:
		e.onBridgeMerge(m)
	case evHangup:
		e.onHangup(m)
	case evHangupRequest, evSoftHangupRequest:
		e.touchKnown(m)
	case evHold, evUnhold:
		e.onHold(m, code == evHold)
	case evMixMonitorStart, evMixMonitorStop, evMixMonitorMute:
		e.onMixMonitor(m, ev)
	case evPickup:
		e.onPickup(m)
	case evBlindTransfer, evAttendedTransfer:
		e.onTransfer(m, ev)
	case evChanSpyStart, evChanSpyStop, evOriginateResponse:
		e.onSpyEvent(m, ev)
	case evLocalBridge, evLocalOptimizationBegin, evLocalOptimizationEnd:
		e.onLocal(m)
	case evConfbridgeStart, evConfbridgeEnd, evConfbridgeJoin, evConfbridgeLeave, evConfbridgeList, evConfbridgeListRooms,
		evConfbridgeMute, evConfbridgeUnmute, evConfbridgeTalking, evConfbridgeLock, evConfbridgeUnlock:
		e.onConfEvent(m, ev)
	case evCoreShowChannel:
		e.onCoreShowChannel(m)
	case evNewexten:
		e.onNewexten(m)
	default:
		e.applyState(m, code)
	}
}

// applyState applies the events about extensions, trunks, queues and
// parking spaces; apply takes the channel events.
func (e *Engine) applyState(m ami.Message, code evCode) {
	switch code {
	// Extensions and trunks.
	case evExtensionStatus:
		e.onExtensionStatus(m)
	case evDeviceStateChange:
		e.onDeviceStateChange(m)
	case evContactStatus, evContactStatusDetail, evContactList:
		e.onContactStatus(m)
	case evPeerStatus:
		e.onPeerStatus(m)
	case evEndpointList, evEndpointDetail:
		e.onEndpoint(m)
	case evRegistry:
		e.onRegistry(m)
	case evDBGetResponse:
		e.onDBGetResponse(m)
	case evDBGetTreeResponse:
		e.onDBGetTreeResponse(m)
	case evMessageWaiting:
		e.onMessageWaiting(m)
	case evVoicemailUserEntry:
		e.onVoicemailUserEntry(m)

	// Queues.
	case evQueueParams:
		e.onQueueParams(m)
	case evQueueMember, evQueueMemberStatus, evQueueMemberAdded:
		e.onQueueMember(m)
	case evQueueMemberRemoved:
		e.onQueueMemberRemoved(m)
	case evQueueMemberPause, evQueueMemberPaused:
		e.onQueueMemberPause(m)
	case evQueueEntry:
		e.onQueueEntry(m)
	case evQueueCallerJoin:
		e.onQueueCallerJoin(m)
	case evQueueCallerLeave:
		e.onQueueCallerLeave(m, false)
	case evQueueCallerAbandon:
		e.onQueueCallerLeave(m, true)
	case evAgentCalled:
		e.onAgentCalled(m)
	case evAgentConnect:
		e.onAgentConnect(m)
	case evAgentComplete:
		e.onAgentComplete(m)

	// Parking.
	case evParkedCall:
		e.onParkedCall(m)
	case evUnParkedCall, evParkedCallGiveUp, evParkedCallTimeOut:
		e.onUnparked(m)
	case evParkedCallSwap:
		e.onParkedCallSwap(m)
	case evParkinglot:
		e.onParkinglot(m)
	}
	// Everything else (VarSet, RTCP*, Cdr, DTMF*, MusicOnHold*,
	// security events, list-complete markers ...) changes nothing we show.
}

// known reports whether a caller ID field holds a value: "s" is none,
// it is the extension FreePBX's dial subroutines run at, which Asterisk
// gives as caller number to a channel dialled without one (an outbound
// route's trunk leg, a ring group's Local halves).
func known(s string) bool {
	return s != "" && s != "<unknown>" && s != "unknown" && s != "s"
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// splitChannel splits "PJSIP/201-0000000a" into tech "PJSIP" and endpoint
// "201". A name without '/' yields empty strings.
func splitChannel(name string) (tech, endpoint string) {
	slash := strings.IndexByte(name, '/')
	if slash <= 0 {
		return "", ""
	}
	tech, rest := name[:slash], name[slash+1:]
	if dash := strings.LastIndexByte(rest, '-'); dash > 0 {
		rest = rest[:dash]
	}
	return tech, rest
}

// phoneTech reports the channel technologies whose endpoints can be
// extensions or trunks.
func phoneTech(tech string) bool {
	return tech == "PJSIP" || tech == "SIP" || tech == "IAX2"
}

type ownerKind uint8

const (
	ownerNone ownerKind = iota
	ownerExt
	ownerTrunk
)

// classify says whom an endpoint belongs to: a trunk when configured as
// one (or, with no trunks configured, when its name is not a number), else
// an extension when known or a number.
func (e *Engine) classify(endpoint string) ownerKind {
	k, _ := e.classifyExt(endpoint)
	return k
}

// classifyExt is classify that also returns the endpoint's extension when
// it is a known one (nil when it is still to be made: extFound makes it),
// so that the extensions are looked up once.
func (e *Engine) classifyExt(endpoint string) (ownerKind, *extState) {
	if endpoint == "" {
		return ownerNone, nil
	}
	if e.trunkSet[endpoint] {
		return ownerTrunk, nil
	}
	if x := e.exts[endpoint]; x != nil || allDigits(endpoint) {
		return ownerExt, x
	}
	if len(e.trunkSet) == 0 {
		return ownerTrunk, nil
	}
	return ownerNone, nil
}

// deviceEndpoint returns the endpoint of a device or interface name
// ("PJSIP/203" -> "203"), or "" for non-phone devices (Queue:, park:, Local/).
func deviceEndpoint(dev string) (tech, endpoint string) {
	slash := strings.IndexByte(dev, '/')
	if slash <= 0 || !phoneTech(dev[:slash]) {
		return "", ""
	}
	return dev[:slash], dev[slash+1:]
}
