// Package calls is ctibridge's call-state engine: it turns the AMI event
// stream of one Asterisk into the live state of every extension, call
// (conversation), queue, parking space and trunk, and publishes that state
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
//   - Publish ends a batch: it re-derives what the batch touched, encodes
//     only entities whose value changed, appends one Change per changed
//     entity to the Feed and stores a new Snapshot in an atomic pointer.
//   - SetLink, BeginResync, EndResync, BeginReconcile and Reconcile keep the
//     state honest across reconnects and drift: channels not confirmed by
//     CoreShowChannels are dropped, hung-up channels are never resurrected
//     by a late list item (tombstones), and the snapshot says it is stale
//     while the link is down, stalled or resynchronising. List items and
//     live events may come in any relative order: an item (a message with
//     an ActionID while lists are expected) never overrides what a live
//     event set since the lists were asked for (channel headers, bridge
//     membership, extension status, queue members and waiting callers,
//     parked calls;
//     EndResync keeps those a live event touched even if the older list
//     missed them), and live events about a channel not
//     known yet are kept during a resync and applied again right after
//     the CoreShowChannel item that creates it.
//   - StreamClock gives replays a deterministic clock read from the stream.
//
// # What it does not do
//
// No I/O, no goroutines, no timers, no clock reads except Config.Now. It
// does not send actions, reconnect or decide when to resync: the AMI link
// owner calls BeginResync/EndResync and Reconcile. It never imports
// net/http or ami.Client; only ami.Message. Unknown events and headers are
// ignored, and events for unknown channels are counted (Stats.Unknown),
// never fatal.
//
// # Concurrency
//
// One goroutine owns the Engine and calls Apply, Publish, SetLink,
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
// owners that have channels when any channel event arrived in the batch,
// compares the result with the published value and encodes only what
// differs; collection JSON is assembled lazily, once per snapshot that
// changed it.
package calls
