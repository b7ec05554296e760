// Package bus spreads one PBX's live state over NATS JetStream, so that
// several ctibridge nodes serve the same state (docs/scale-out.md).
//
// It replicates the engine's input, not its output: the calls engine is
// deterministic (messages in, snapshots and a seq-numbered feed out, clock
// only through calls.Config.Now), so a Replica on the bridge holding the
// AMI link records every call the link makes on the engine (Apply,
// Publish, SetLink, BeginResync, ..., with the time of each and the
// phonebook's answers) as binary ops, and any other Replica that replays
// them reaches the same snapshots and the same feed, byte for byte, with
// the same seqs. TestReplicaDeterministic holds that over every recording
// in the repository.
package bus
