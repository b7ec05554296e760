// Package amitest is a scripted fake Asterisk for tests: an ami.Server on
// loopback that records every frame it receives, answers scripted actions
// (Expect), replays recorded transcripts byte for byte (Replay), and drops
// connections on command (Drop).
//
// A Server belongs to one test; its methods are safe for concurrent use.
package amitest
