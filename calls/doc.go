// Package calls is ctibridge's call-state engine: it turns the AMI event
// stream of one Asterisk into the live state of every extension, call
// (conversation), queue, parking space, trunk and ConfBridge conference,
// and publishes that state
// as immutable, pre-encoded snapshots plus a seq-numbered change feed.
//
// # What it does
//
//   - Apply takes one ami.Message (a live event or an action's list item)
//     and updates the state. Channels, bridges and dial relations are
//     tracked; conversations are derived from them at Publish, so they
//     follow transfers, pickups and Local channel optimisation whatever the
//     event order. A conversation is keyed "<caller channel>><callee
//     channel>" and disappears when its owner's channel hangs up. Talk time
//     (answeredAt) starts when the channel is bridged with its real
//     counterpart, never at an Answer() before a queue or an IVR.
//   - FreePBX's topologies (docs/design.md): Local channel pairs of ring
//     groups, follow-me and queue members are looked through to the
//     phone, and carry the queue of the call; a call ringing several
//     parties shows what it called; a user's devices (AstDB
//     DEVICE/<device>/user, Config.Devices) have their channels owned by
//     the user's extension, whose status joins theirs (devices.go).
//   - Some conversations carry more: an attended transfer run by Asterisk
//     (Atxfer, or the *2 feature) is tracked from the moment the
//     transferer's channel moves from the bridge the transferee stays in to
//     a consult bridge: the transferer then has two conversations (the
//     held one and the outgoing consult, which names the number the
//     transfer dialled until its far end is an extension), and every
//     party's conversation says "transfer" {id, state, role} until it
//     hangs up (transfer.go). A transferer that hangs up while the target
//     rings makes it a blonde transfer: the transferee's conversation
//     names the target, not connected, until it answers. After a resync
//     (a restart) the markers are rebuilt from the bridges and the Local
//     pair the lists show. A
//     parked party's conversation says "parked" and the parker's
//     conversation disappears (parkings.go); a ChanSpy session shows the
//     spied extension and the mode on the spy's conversation (spy.go); a
//     conference member's conversation is inConference with the room as
//     counterpart, never a two-party call; the first leg of ctibridge's own
//     Originate (destination in AccountCode) shows that destination (a
//     parking space's parked caller while one waits there) and raises no
//     extenRinging; a caller whose channel runs VoiceMail (Newexten, or a
//     CoreShowChannel's Application) talks to the mailbox: one
//     conversation "<channel>>", voicemail flagged, the mailbox's number
//     as counterpart, answered when VoiceMail answered (vmcall.go).
//   - Conferences: rooms and members from the Confbridge* events and, at
//     resync, ConfbridgeListRooms and ConfbridgeList items (the link owner
//     sends the ConfbridgeList per room that the engine asks for as a
//     follow-up). Members
//     whose channel did not survive the resync, rooms left empty and rooms
//     a room list left out are removed at EndResync (conferences.go).
//   - Publish ends a batch: it re-derives what the batch touched, encodes
//     only entities whose value changed, appends one Change per changed
//     entity to the Feed and stores a new Snapshot in an atomic pointer.
//     An extension's change that drops conversations whose own channel
//     hung up carries their Hangup events' causes (Change.Hangups; Multi
//     passes them on): the one fact of a call's end its JSON has not.
//   - Every entity is encoded once per visibility class (Class, class.go):
//     Full at Publish, NumbersHidden (the other party's numbers and names
//     blank, channel names and conversation ids by Config.Opaque's opaque
//     names) at most once, on first need, field by field in the same
//     encoders (json.go). The Snapshot and the Feed's Change hand out
//     either (ExtensionJSONAs, QueuesJSONAs, Change.JSON, ...), the
//     extensions collection for a reader who sees some extensions in full
//     as the hidden pieces cut around those (ExtensionsFor), a room for a
//     reader who sees some members (ConferenceJSONFor). Readers (rest, ws)
//     pick bytes; none parses or rewrites JSON.
//   - Multi (multi.go) merges several engines, one per PBX, into one
//     combined Snapshot and Feed: the default PBX's ids and bytes as they
//     are (its entities' NumbersHidden bytes are the engine's own), a
//     named PBX's ids qualified "site2:201" (QualifyID, SplitID) and its
//     objects marked "pbx":"site2" in both classes (its NumbersHidden
//     bytes are made lazily from the qualified value, conversation ids
//     opaque as the combined ids). Sync diffs an engine's latest snapshot
//     against the one merged before, so it costs what changed. Each PBX's
//     link is in Snapshot.PBXs; StatusFor, StaleFor and Change.StatusFor
//     are the status of some PBXs only, for their readers
//     (multi_status.go).
//   - RefreshDurations, called by the link owner once a second, re-encodes
//     the extensions holding an answered conversation (and gives such
//     trunks a new entity, put together with the durations at its time
//     when read) so their "duration" is never more than about a second
//     old, and stores a new snapshot; it appends nothing to the feed
//     (durations.go).
//   - SetLink, BeginResync, EndResync, BeginReconcile and Reconcile keep the
//     state honest across reconnects and drift: channels not confirmed by
//     CoreShowChannels are dropped, hung-up channels are never resurrected
//     by a late list item (tombstones), and the snapshot says it is stale
//     while the link is down, stalled or resynchronising. List items and
//     live events may come in any relative order: an item (a message with
//     an ActionID while lists are expected) never overrides what a live
//     event set since the lists were asked for (channel headers, bridge
//     membership, extension status, queue members and waiting callers,
//     parked calls, trunk status;
//     EndResync keeps those a live event touched even if the older list
//     missed them). A follow-up's answer, applied when the link has it
//     all, is judged the same way against the moment Followups handed
//     its action out (an action not handed out counts as older than any
//     live event): an "In use" written during a call never overrides the
//     NOT_INUSE of its hang-up that came after it on the wire, a
//     ContactStatusDetail never brings an unregistered phone back online,
//     an AstDB DND read never undoes a *76 toggle (Custom:DND) made after
//     it was sent. Live
//     events about a channel not
//     known yet are kept during a resync and applied again right after
//     the CoreShowChannel item that creates it.
//   - Followups and ApplyAnswer are how the engine reads what the fixed
//     resync lists do not give (docs/link.md): the engine says which
//     actions it wants (PJSIPShowEndpoint per listed endpoint for names and
//     mailboxes, FreePBX's AstDB families CF, CFB, CFU, DND and AMPUSER by
//     DBGetTree or DBGet, VoicemailUsersList, MailboxCount per MWI device
//     or mailbox counted before and not listed, Parkinglots) and
//     learns from their answers; the link sends them. AstDB values are
//     validated before they become state (Stats.BadValues counts the
//     refused ones); an action the PBX lacks is logged once and not asked
//     again until the next resync.
//   - Extensions carry their forwards and DND as FreePBX stores them, and
//     their voicemail counts (MessageWaiting, VoicemailUsersList,
//     MailboxCount); PresenceOf and
//     MainPresenceOf derive NethCTI's user presence from them, and Publish
//     announces changes of it as userPresenceUpdate.
//   - StreamClock gives replays a deterministic clock read from the stream.
//
// # What it does not do
//
// No I/O, no goroutines, no timers, no clock reads except Config.Now. It
// does not send actions, reconnect or decide when to resync: the AMI link
// owner calls BeginResync/EndResync and Reconcile, and sends the
// follow-ups the engine asks for. It never imports
// net/http or ami.Client; only ami.Message. Unknown events and headers are
// ignored, and events for unknown channels are counted (Stats.Unknown),
// never fatal.
//
// # Concurrency
//
// One goroutine owns the Engine and calls Apply, Publish,
// RefreshDurations, SetLink,
// BeginResync, EndResync, BeginReconcile, Reconcile and Stats. Snapshot and
// Feed may be called from any goroutine; a Snapshot and the byte slices it
// and the Feed hand out are immutable and may be kept and shared freely.
// The engine never blocks on readers: Feed.Wait returns a channel closed on
// the next append, and readers that fall more than Config.FeedSize changes
// behind get ok=false from Feed.Since and restart from a snapshot.
//
// # Cost
//
// Events that change nothing shown (VarSet, Newexten, RTCP, Cdr ...) are
// rejected without allocating. Publish re-derives the conversations of the
// owners of the channels the batch changed and of the channels linked with
// them (bridge, dial, Local pair, transfer, spy: dirty.go), whatever the
// number of other calls up, compares the result with the published value
// and encodes only what differs (an extension whose conversations are
// derived equal to the published ones keeps their map: a status change
// builds none). An extension whose display name changes
// re-derives the extensions whose conversations show its number, found
// in an index of the numbers shown (extmap.go), not by a scan. Dirty sets
// that grew large (a resync marks every owner) are replaced rather than
// cleared, so later Publishes do not range over their old size.
// Snapshot.Extensions is an ExtensionMap, a tree of small shards (sorted
// slices of each extension's ent) shared between snapshots: a Publish
// copies the shards it changes, one allocation each, not the map.
// Collection JSON is assembled lazily, once per class and snapshot that
// changed it and was asked for it; a changed entity costs two
// allocations besides its JSON (its ent: value, bytes and the hidden
// class's sync.Once; and the handle its feed Change holds, cut when the
// entity changes again so the feed retains no superseded values), and
// nothing more while no reader asks for the hidden class; the extensions' is
// kept in pieces of 1,024 extensions (ExtensionsParts), a change
// re-encoding its piece only, so REST writes the pieces as they are; a
// queue's members' JSON is kept in one buffer, a member re-encoded only
// when it changed (queuepieces.go). Snapshot.Queues and Snapshot.Trunks
// (a QueueMap and a TrunkMap, CollMaps) read the queues' and trunks'
// entities, so a Publish copies a map of pointers to them,
// and a queue's members and waiting callers map to pointers, each to a
// value never written, shared by the snapshots: a queue's first change
// after a Publish copies those pointers, not the values. A
// trunk, which may hold a thousand conversations, keeps which of its
// channels each is derived from (trunkconvs.go) and holds them in a
// ConvMap (convmap.go): sorted chunks of conversations, each with its JSON
// in two parts around the duration, shared by the snapshots until one of
// them changes. Publish re-derives the conversations of the trunk's
// channels the batch touched, copies the chunks it changes and encodes
// those conversations only; the trunk's JSON is put together from the
// pieces when a reader asks for it whole (durations at the entity's
// time), and the feed gets what changed, a trunkConversations change
// (trunkdelta.go). A queue likewise: its members' JSON kept in pieces
// (queuepieces.go), the queue whole made when read, the feed given a
// queueMembers change, its fields and waiting callers with the members
// set and removed (queuedelta.go); Change.Whole leads from a delta to its
// entity whole while it is the latest, ChangeType.Whole names the change
// that carries it whole. A Change's Type is a ChangeType, its wire name
// its String; the changes readers follow as values carry them
// (Change.Extension, Ringing, Presence, Conference), so no reader parses
// the engine's JSON back.
// BenchmarkApplyPublishAtScale measures Apply and Publish with 5,000
// extensions and 2,000 calls up, plain internal calls and a call
// centre's mix (queue, trunk and transferred calls from
// loadtest/synthpbx); BenchmarkPublishAtScale holds the cost of
// one call ending and another starting flat from 10 to 2,000 calls up, and
// TestPublishAtScaleAllocs bounds its allocations.
package calls
