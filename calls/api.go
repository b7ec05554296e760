package calls

// This file is the contract other packages (link, rest, ws, cmd) code
// against: Config, LinkState, Stats and the Engine's exported methods.

import (
	"log/slog"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// Now is the clock. Default time.Now. Replays pass a StreamClock's Now.
	Now func() time.Time
	// FeedSize is how many changes the Feed keeps for resume. Default 10000.
	FeedSize int
	// Trunks names the endpoints that are trunks, not extensions ("trunk").
	// When empty, any PJSIP/SIP/IAX2 endpoint whose name is not all digits
	// (and not a known extension) is taken for a trunk.
	Trunks []string
	// QueueNumbers gives the number callers dial to reach a queue, by
	// app_queue name ("support" -> "600"), so that the queue answers to
	// both from the first snapshot; otherwise the number is learnt when
	// the first caller joins. Not needed on FreePBX, which names queues by
	// their number.
	QueueNumbers map[string]string
	// Names gives display names of extensions by number, used until the PBX
	// reports one. An extension listed here exists from the start (offline).
	Names map[string]string
	// Devices ties devices to their users, device endpoint to the user's
	// extension ("91201" -> "201"): a device's calls are its user's
	// (devices.go). The PBX's AstDB adds its own (FreePBX's
	// DEVICE/<device>/user, read at every resync).
	Devices map[string]string
	// NameLookup, optional, names a number the PBX gives no name for (a
	// counterpart, a ringing caller). It runs on the engine goroutine, so it
	// must not block: an in-memory phonebook index, not a database query.
	// It returns "" when it knows no name.
	NameLookup func(number string) string
	// RingLookup, optional, names the caller of an extenRinging for the
	// rung extension's users (their own contacts first, then the public
	// ones): the event goes to them only, so it may carry what only they
	// may see, while conversations, seen by many, use NameLookup. Same
	// rules as NameLookup; without it extenRinging uses NameLookup.
	RingLookup func(exten, number string) string
	// Cellphones gives, by extension, the cellphone number of the user
	// whose main extension it is: a forward to it is presence "cellphone".
	Cellphones map[string]string
	// Opaque writes channel names and conversation ids in the
	// NumbersHidden class (auth.Opaquer: a keyed hash). Without it that
	// class leaves them empty (tests that do not look at them).
	Opaque Opaquer
	// Log receives rate-limited warnings. Default: discard.
	Log *slog.Logger
}

// LinkState is the state of the PBX link as shown to clients.
type LinkState uint8

const (
	LinkDown      LinkState = iota // no AMI connection: state is stale
	LinkResyncing                  // connected, resynchronising: state is stale
	LinkLive                       // connected and resynchronised
	LinkStalled                    // connected, but the PBX stopped answering: state is stale
)

// String is the "pbx" value of the status JSON: down, resyncing, live or
// stalled.
func (s LinkState) String() string {
	switch s {
	case LinkResyncing:
		return "resyncing"
	case LinkLive:
		return "live"
	case LinkStalled:
		return "stalled"
	}
	return "down"
}

// Stats counts what the engine has seen; read through Engine.Stats.
type Stats struct {
	Events       uint64            // messages applied
	ByType       map[string]uint64 // messages applied, by event name
	Unknown      uint64            // events for unknown channels or out of order
	DriftRepairs uint64            // corrections made by Reconcile (and by list items outside a resync): events missed on a live link
	ResyncLoads  uint64            // what a resync changed: the state loaded at a connection, what changed while the link was down
	BadValues    uint64            // AstDB values refused (a forward target with letters or CR/LF, a bad DND value or name)
}

// New returns an engine with empty state, link down. Its first snapshot
// (version 0) is available at once.
func New(cfg Config) *Engine { return newEngine(cfg) }

// Apply updates the state from one AMI event or list item. It never panics
// on bad input; unknown events and fields are ignored. Responses and
// actions are ignored too.
func (e *Engine) Apply(m ami.Message) { e.apply(m) }

// Publish ends a batch: if anything changed since the last Publish, it
// appends the changes to the Feed and publishes a new Snapshot. It returns
// the current snapshot.
func (e *Engine) Publish() *Snapshot { return e.publish() }

// SetLink records the link state (down on disconnect, resyncing on connect,
// stalled while a keep-alive is late; live is normally reached through
// EndResync, or again after a stall). Any state but live marks the
// snapshot stale. SetLink(LinkResyncing) starts a resync (as BeginResync)
// unless one is running; SetLink(LinkStalled) leaves a running one alone.
func (e *Engine) SetLink(s LinkState) { e.setLink(s) }

// BeginResync starts a resynchronisation: call it before sending the list
// actions (CoreShowChannels, ExtensionStateList, PJSIPShowEndpoints,
// QueueStatus, ParkedCalls, DeviceStateList, ConfbridgeListRooms), then
// the follow-ups (Followups(FollowResync)). The snapshot is stale until
// EndResync. List items and live events then go through Apply, in any
// order.
func (e *Engine) BeginResync() { e.beginResync() }

// EndResync ends it after every list has been applied through Apply:
// channels neither confirmed by a CoreShowChannel item nor created since
// BeginResync are removed, queue entries and parked calls whose channel is
// gone are removed, queue members and callers not listed by a QueueStatus
// answer are removed, conference members whose channel is gone, rooms left
// empty and rooms a ConfbridgeListRooms answer left out are removed, and the
// link becomes live.
func (e *Engine) EndResync() { e.endResync() }

// BeginReconcile marks the moment a CoreShowChannels action for Reconcile
// is sent: channels created after it are never removed by that Reconcile.
// Without it, Reconcile only removes unlisted channels that already existed
// at the previous Reconcile (or EndResync): safe against calls set up while
// the list was in flight, at the cost of a ghost living one period longer.
func (e *Engine) BeginReconcile() { e.beginReconcile() }

// Reconcile compares the state with a CoreShowChannels list (its
// CoreShowChannel items; other messages are ignored) and repairs drift:
// unlisted channels older than BeginReconcile are removed, listed unknown
// ones are added, bridges are corrected. It returns the number of repairs,
// also added to Stats.DriftRepairs.
func (e *Engine) Reconcile(items []ami.Message) int { return e.reconcile(items) }

// Followups returns the actions the engine wants sent (see FollowupKind):
// for FollowResync and FollowRefresh every feature's list plus what events
// asked for, for FollowPending only the latter. The link owner sends them
// (pipelined, in any order) and hands each answer to ApplyAnswer. Engine
// goroutine only.
func (e *Engine) Followups(k FollowupKind) []ami.Message { return e.followups(k) }

// ApplyAnswer applies the answer to a follow-up action: its list items go
// through Apply, then the action's own handling runs (a DBGet answered
// "not found" clears the value, a MailboxCount's counts are headers of
// the response). err is Do's error; an *ami.ActionError saying the PBX
// does not know the action is logged once, and the engine stops asking
// for it until the next BeginResync (a PBX without DBGetTree is then read
// with DBGet). Engine goroutine only.
func (e *Engine) ApplyAnswer(action ami.Message, resp ami.Response, err error) {
	e.applyAnswer(action, resp, err)
}

// Stats returns a copy of the counters. Engine goroutine only.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.ByType = make(map[string]uint64, len(e.byType))
	for k, n := range e.byType {
		s.ByType[k] = *n
	}
	return s
}

// Snapshot returns the latest published snapshot, never nil. Safe from any
// goroutine.
func (e *Engine) Snapshot() *Snapshot { return e.snap.Load() }

// Feed returns the change feed. Safe from any goroutine.
func (e *Engine) Feed() *Feed { return e.feed }
