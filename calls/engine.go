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
	tombs    tombstones
	stats    Stats              // ByType unused: byType holds it
	byType   map[string]*uint64 // Stats.ByType's counters: one map lookup an event
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
	dirtyExt    map[string]struct{}
	dirtyTrunk  map[string]struct{}
	dirtyQueue  map[string]struct{}
	dirtyMember map[memberKey]struct{}
	dirtyPark   map[string]struct{}
	dirtyConf   map[string]struct{}
	ringing     []*channel // extension channels that started ringing

	version uint64
	durAt   int64 // ms of the last RefreshDurations that ran
	pub     published
	scratch []byte   // publishExts' encoding buffer
	extKeys []string // publishExts' sorted dirty extensions
	changes []Change
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

func (e *Engine) count(ev string) {
	e.stats.Events++
	n := e.byType[ev]
	if n == nil {
		if len(e.byType) >= maxTypes {
			return
		}
		n = new(uint64)
		e.byType[strings.Clone(ev)] = n
	}
	*n++
}

func (e *Engine) apply(m ami.Message) {
	ev := m.Event()
	if ev == "" {
		return
	}
	e.count(ev)
	e.resync.events++
	if e.resync.active {
		e.keepForList(m, ev)
	}
	switch ev {
	// Channels and conversations.
	case ami.EventNewchannel:
		e.onNewchannel(m)
	case ami.EventNewstate, ami.EventNewCallerid, ami.EventNewConnectedLine, ami.EventNewAccountCode:
		e.onNewstate(m, ev)
	case ami.EventDialBegin:
		e.onDialBegin(m)
	case ami.EventDialState:
		e.onDialState(m)
	case ami.EventDialEnd:
		e.onDialEnd(m)
	case ami.EventBridgeCreate:
		e.onBridgeCreate(m)
	case ami.EventBridgeEnter:
		e.onBridgeEnter(m)
	case ami.EventBridgeLeave:
		e.onBridgeLeave(m)
	case ami.EventBridgeDestroy:
		e.onBridgeDestroy(m)
	case ami.EventBridgeMerge:
		e.onBridgeMerge(m)
	case ami.EventHangup:
		e.onHangup(m)
	case ami.EventHangupRequest, ami.EventSoftHangupRequest:
		e.touchKnown(m)
	case ami.EventHold, ami.EventUnhold:
		e.onHold(m, ev == ami.EventHold)
	case ami.EventMixMonitorStart, ami.EventMixMonitorStop, ami.EventMixMonitorMute:
		e.onMixMonitor(m, ev)
	case ami.EventPickup:
		e.onPickup(m)
	case ami.EventBlindTransfer, ami.EventAttendedTransfer:
		e.onTransfer(m, ev)
	case ami.EventChanSpyStart, ami.EventChanSpyStop, ami.EventOriginateResponse:
		e.onSpyEvent(m, ev)
	case ami.EventLocalBridge, ami.EventLocalOptimizationBegin, ami.EventLocalOptimizationEnd:
		e.onLocal(m)
	case ami.EventConfbridgeStart, ami.EventConfbridgeEnd, ami.EventConfbridgeJoin, ami.EventConfbridgeLeave, ami.EventConfbridgeList, ami.EventConfbridgeListRooms,
		ami.EventConfbridgeMute, ami.EventConfbridgeUnmute, ami.EventConfbridgeTalking, ami.EventConfbridgeLock, ami.EventConfbridgeUnlock:
		e.onConfEvent(m, ev)
	case ami.EventCoreShowChannel:
		e.onCoreShowChannel(m)
	default:
		e.applyState(m, ev)
	}
}

// applyState applies the events about extensions, trunks, queues and
// parking spaces; apply takes the channel events.
func (e *Engine) applyState(m ami.Message, ev string) {
	switch ev {
	// Extensions and trunks.
	case ami.EventExtensionStatus:
		e.onExtensionStatus(m)
	case ami.EventDeviceStateChange:
		e.onDeviceStateChange(m)
	case ami.EventContactStatus, ami.EventContactStatusDetail, ami.EventContactList:
		e.onContactStatus(m)
	case ami.EventPeerStatus:
		e.onPeerStatus(m)
	case ami.EventEndpointList, ami.EventEndpointDetail:
		e.onEndpoint(m)
	case ami.EventRegistry:
		e.onRegistry(m)
	case ami.EventDBGetResponse:
		e.onDBGetResponse(m)
	case ami.EventDBGetTreeResponse:
		e.onDBGetTreeResponse(m)
	case ami.EventMessageWaiting:
		e.onMessageWaiting(m)
	case ami.EventVoicemailUserEntry:
		e.onVoicemailUserEntry(m)

	// Queues.
	case ami.EventQueueParams:
		e.onQueueParams(m)
	case ami.EventQueueMember, ami.EventQueueMemberStatus, ami.EventQueueMemberAdded:
		e.onQueueMember(m)
	case ami.EventQueueMemberRemoved:
		e.onQueueMemberRemoved(m)
	case ami.EventQueueMemberPause, ami.EventQueueMemberPaused:
		e.onQueueMemberPause(m)
	case ami.EventQueueEntry:
		e.onQueueEntry(m)
	case ami.EventQueueCallerJoin:
		e.onQueueCallerJoin(m)
	case ami.EventQueueCallerLeave:
		e.onQueueCallerLeave(m, false)
	case ami.EventQueueCallerAbandon:
		e.onQueueCallerLeave(m, true)
	case ami.EventAgentCalled:
		e.onAgentCalled(m)
	case ami.EventAgentConnect:
		e.onAgentConnect(m)
	case ami.EventAgentComplete:
		e.onAgentComplete(m)

	// Parking.
	case ami.EventParkedCall:
		e.onParkedCall(m)
	case ami.EventUnParkedCall, ami.EventParkedCallGiveUp, ami.EventParkedCallTimeOut:
		e.onUnparked(m)
	case ami.EventParkedCallSwap:
		e.onParkedCallSwap(m)
	case ami.EventParkinglot:
		e.onParkinglot(m)
	}
	// Everything else (VarSet, Newexten, RTCP*, Cdr, DTMF*, MusicOnHold*,
	// security events, list-complete markers ...) changes nothing we show.
}

// known reports whether a caller ID field holds a value.
func known(s string) bool {
	return s != "" && s != "<unknown>" && s != "unknown"
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
	if endpoint == "" {
		return ownerNone
	}
	if e.trunkSet[endpoint] {
		return ownerTrunk
	}
	if _, ok := e.exts[endpoint]; ok || allDigits(endpoint) {
		return ownerExt
	}
	if len(e.trunkSet) == 0 {
		return ownerTrunk
	}
	return ownerNone
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
