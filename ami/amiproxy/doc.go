// Package amiproxy is a TCP proxy for AMI connections that breaks them on
// command, for tests and the fault suite (loadtest chaos): Kill closes
// both sockets, HalfOpen swallows every byte both ways while keeping the
// sockets open (a dead PBX host, a stuck Asterisk, a broken NAT), LongLine
// replaces the server's stream with a header line that never ends. It
// notes when connections open and close and can hand over, parsed, every
// message it forwards to the client.
//
// It imports ami (the reader) and nothing else of the project, and not
// testing, so both test helpers (ami/amitest) and programs (loadtest) use
// it. A Proxy's methods are safe for concurrent use; Run owns every
// goroutine it starts and returns once they have stopped.
package amiproxy
