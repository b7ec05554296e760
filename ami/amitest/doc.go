// Package amitest is a scripted fake Asterisk for tests: an ami.Server on
// loopback that records every frame it receives, answers scripted actions
// (Expect), replays recorded transcripts byte for byte (Replay), and drops
// connections on command (Drop). Proxy relays connections to a server and
// turns them half-open on command (Freeze): sockets kept, bytes swallowed.
// Model answers a resync's list actions (CoreShowChannels, QueueStatus,
// ...) from the events of a stream so far, as Asterisk would at that
// point. Shapes learns from recordings each event kind's header lists,
// fixed values and Newexten steps, for a PBX that builds its own events
// (pbxsim, loadtest/synthpbx) to compare them with.
//
// A Server or Proxy belongs to one test; their methods are safe for
// concurrent use.
package amitest
