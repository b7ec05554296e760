// Package ami speaks the Asterisk Manager Interface (AMI), the line-based
// protocol Asterisk serves on TCP port 5038. It knows the protocol only:
// nothing here knows about calls.
//
// The flow of a session: the server sends a banner line ("Asterisk Call
// Manager/11.0.0"); the client sends Login (plain Secret, or Challenge then
// an MD5 Key); then actions go out, each with an ActionID, and responses come
// back carrying it, interleaved with events. An action whose answer is a list
// (CoreShowChannels, QueueStatus, ...) is answered by a response with
// "EventList: start", then one event per item, then a "...Complete" event
// with "EventList: Complete", all with the same ActionID.
//
// A frame is a run of "Key: Value" lines ended by CRLF and closed by an empty
// line. Message keeps header order, key case and repeated keys; Get finds a
// key in any case, and Read finds a KeySet's keys so in one pass. Reader frames
// messages from a byte stream with size limits (a line or frame crossing
// one is a protocol error at once), skipping and counting garbage lines;
// WriteMessage refuses any header whose key or value holds CR, LF or NUL, so
// a value taken from a user can never become a header or an action of its own.
//
// Client is the reconnecting client: Run owns the connection (banner, login
// only after a manager's banner: ErrNotManager,
// one bufio.Reader for everything read, keep-alive Ping with a read-idle
// deadline, backoff with a fast phase after a connection that was up
// dropped, rate-limited logs of malformed input); Next hands the unsolicited
// stream to one consumer in batches, with LinkUp, LinkDown, LinkStalled (a
// Ping is late) and LinkResumed markers, and never lets a slow consumer
// block the reader (past MaxQueue the connection is dropped and the
// consumer resynchronises); Do, safe for any
// number of goroutines, pipelines actions and gathers event lists into one
// Response. Probe (probe.go) logs in once with a Client's Config, the
// Client's own login code, and logs off: it tells a refused connection,
// a timeout, a refused login and a peer that is not a manager apart
// (ProbeError). Server is the other side (tests, the simulated PBX), and Recorder
// writes raw streams to rotating files with secrets scrubbed. See
// docs/ami.md for the design and measurements.
//
// names.go spells every event and action the project uses as an untyped
// string constant (EventNewchannel, ActionOriginate, ...), the exact name
// Asterisk 22 puts in the "Event" or "Action" header, so a switch over
// m.Event() reads as one over literals and costs the same. TestEventNames
// holds each event name against the recordings in testdata.
//
// Reader and Message values are not safe for concurrent mutation; a Message
// returned by a Reader is never mutated afterwards and may be shared. Client,
// Server, Session and Recorder methods are safe for concurrent use, except
// that only one goroutine may call Client.Next at a time.
package ami
