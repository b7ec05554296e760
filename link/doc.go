// Package link runs the live link between an AMI connection and the call
// engine: it feeds the event stream into a calls.Engine (through the Engine
// interface, which a recording wrapper such as bus.Replica also satisfies)
// in batches, publishing one snapshot per batch; it resynchronises the engine from the PBX's list
// actions on every (re)connect and after an Asterisk restart; and it
// reconciles the engine against CoreShowChannels periodically to repair drift.
//
// calls is pure and ami knows only the protocol; link is the one place where
// the two meet with goroutines and I/O. Link.Run owns every goroutine it
// starts and waits for them before it returns. The engine is only touched
// from Run's goroutine; everything exported besides Run is safe to call from
// any goroutine.
//
// Liveness: when the AMI client reports a late keep-alive (ami.LinkStalled)
// the engine is set to calls.LinkStalled at once, so every client sees the
// state as stale before the link is declared dead; ami.LinkResumed puts it
// back to what it was (live, or resyncing).
package link
