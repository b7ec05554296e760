// Package bus spreads one PBX's live state over NATS JetStream, so that
// several ctibridge nodes serve the same state (docs/scale-out.md).
//
// It replicates the engine's input, not its output: the calls engine is
// deterministic (messages in, snapshots and a seq-numbered feed out, clock
// only through calls.Config.Now), so a Replica on the bridge holding the
// AMI link records every call the link makes on the engine (Apply,
// Publish, SetLink, BeginResync, ..., with the time of each and the
// phonebook's answers) as binary ops (codec.go, replica.go), and any other
// Replica that replays them (replay.go) reaches the same snapshots and the
// same feed, byte for byte, with the same seqs. TestReplicaDeterministic
// holds that over every recording in the repository.
//
// A Node (node.go, run.go) is one process on the bus: it creates the PBX's
// stream (CTIBRIDGE_<PBX>, subject ctibridge.<pbx>.ops) and its genesis
// (whose id is the WebSocket epoch of every node) and the shared key of
// auth's opaque names (KV ctibridge_keys), follows the stream into the
// Replica it serves from and, on a bridge, contends for the PBX's lease
// (KV ctibridge_leases, lease.go). The winner catches its primary Replica
// up with the stream, writes a lead record, marks the state down and runs
// the AMI link on the primary; every publish expects the stream's last seq
// to be its own (fencing: a deposed leader's publish fails and Run returns
// ErrDeposed). A leader acts on the PBX only under a grant that
// ends LeaseTTL-LeaseTTL/6 after it sent its last stored write of the
// lease, before any standby can take over (fence.go): each action is
// stamped with the lease's term and refused with ErrStaleLease once the
// grant ended, and the node steps down then (Run returns
// ErrLeaseExpired). Every node that does not lead watches the lease and, when
// the leader is silent for half the lease TTL, publishes a stall marker
// (stall.go) that every node replays as SetLink(stalled): no client is
// told live while nobody follows the PBX; a leader alive after all adopts
// the marker and publishes its link state again. A node that cannot
// hear its stream (its NATS connection down, the stream's info
// unreadable during an election, its consumer silent with the stream
// ahead) says so on its own, outside the feed: its State is stalled and
// stale at the same seq until it has caught up, and it restarts its
// consumer as soon as it finds it silent or its connection reconnects
// (unheard.go). The leader beats on core NATS every LeaseTTL/12 with
// the last seq it stored (beat.go; held up while a publish is retried):
// a node that hears no beat for LeaseTTL/4, or has not applied a beat's
// seq that long after it came, says its state is stale on the same
// unheard say, on a timer, and live again only once a beat came and
// its seq is applied; a node starts stale until its first beat's seq
// is applied (not live halfway through its replay). No running node gives up on NATS: its consumer is asked
// for again, with backoff, for as long as Run lives (an outage of any
// length leaves it unheard, then it resumes after the last seq it
// applied; a message after a hole in the seqs that is not a genesis,
// which the ordered consumer and the purge-keeps-genesis rollover make
// impossible, is refused with ErrGap and stops Run rather than serve a
// state short of ops), a leader's publish is retried until stored or Run ends (its
// link waits meanwhile: no op is published into a void), and only Open's
// setup gives up, after 15 s. Actions reach the leader by request/reply (actions.go;
// the Node is a rest.PBX and a rest.Refresher). A bridge with
// Config.Prefer standing by asks a leader that does not prefer the PBX
// to hand it over (handover.go): the leader steps down at a safe point,
// its last message saying resyncing, and rewrites the lease naming the
// preferred node, which leads without a "down" of its own; Run returns
// ErrHandedOver on the old leader. A preferred node asks only while
// Config.Reachable passes (cmd/ctibridge: an AMI login, ami.Probe). A
// leader whose AMI link has been down for Config.YieldAfter (default
// 10 s) asks the standbys, on ctibridge.<pbx>.yield, whether they pass
// Reachable, and hands the lead by the same handover to the first that
// does (yield.go); when none does it keeps the lead and asks again
// YieldAfter after the refusal.
//
// The log is cut into generations (rollover.go): past Config.RollBytes
// or RollAge the leader's link resyncs on the connection it has
// (LinkPBX, the wrapper of the AMI client it reads, hands it a LinkDown
// and a LinkUp), the primary publishes a fenced genesis and restarts its
// engine (calls.Engine.Restart), every node builds the new generation on
// a shadow replica while clients keep the old state, stale, and adopts
// it once live (calls.Engine.Adopt), and the leader purges the stream up
// to the genesis; a node that starts reads from the stream's first
// message. The epoch stays; the feed jumps past every seq given out, so
// clients from before take a new snapshot.
//
// The leader's messages fit the servers' max_payload (Replica.fit): a
// long follow-up answer is recorded an op per item, an op too large for
// any message is dropped with an error rather than refusing every
// publish. Node.Stats and NewCollector give the node's figures for
// /metrics (metrics.go).
//
// What an unheard flip costs. Going unheard and heard again sends every
// WebSocket client two whole snapshots (ws: the unheard one under an
// epoch of its own), unless the client asked for status deltas
// ("deltas":["status"] in its subscribe, as the panel does): then a flip
// is two pbxStatus events, a small fraction of a snapshot's bytes and of
// the hub's time (BenchmarkUnheardFlip and BenchmarkUnheardFlipStatus in
// ws; figures in docs/performance.md), which are truthful through three
// rules (ws/unheard.go): (1) going unheard, a
// pbxStatus stalled/stale at the client's seq, taking no seq, and heard
// again one of the node's status the same way; (2) while unheard, every
// pbxStatus change of the feed (a stall marker's, or a restore's "live"
// applied during a catch-up) is sent to them as the node says it,
// stalled, and to the other clients not at all (TestUnheardStatusNotLive,
// TestUnheardStatusDeltas); (3) "resumed" is followed by the node's
// current pbxStatus, so that a client that resumes elsewhere from a seq
// it was told stale at out of the feed learns the status (the other
// node's feed since that seq need not hold one: TestResumedStatus). The
// snapshots stay for the other clients: an event whose seq does not grow
// is dropped as already applied by a client that follows the older rule
// (the panel did, panel/static/live.js), which would go on showing the
// link live; and for a client whose last snapshot was unheard (it
// subscribed while unheard): it holds the unheard epoch, so it gets the
// live snapshot on hearing again (TestUnheardSnapshotThenHeard). A resume
// asked while unheard still gets the unheard snapshot.
//
// natstest starts real nats-server processes for the tests.
package bus
