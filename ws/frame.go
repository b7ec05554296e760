package ws

import (
	"strconv"

	"github.com/ctibridge/ctibridge/calls"
)

// Frames are written by the hub's own code, not by gorilla/websocket:
// gorilla writes one frame per socket write, and the fan-out rate is
// decided by how many frames go out per write (docs/websocket.md). A
// server frame is unmasked (RFC 6455 section 5.1), so it is a 2 to 10
// byte header followed by the payload, and one encoded event frame can be
// shared by every client that receives it.

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

// maxHeader is the largest frame header a server writes.
const maxHeader = 10

// frame is one encoded WebSocket frame, header included, shared read-only
// by every client it is queued to.
type frame struct {
	b    []byte    // the frame, or its first piece
	more [][]byte  // further pieces of the payload (snapshots), written after b
	seq  uint64    // feed seq of an event or snapshot; 0 for control replies
	ent  uint32    // coalescing id: a newer frame with the same id replaces this one; 0 never
	at   int64     // hub clock (ns since Hub.epoch) when queued, for the slowness check
	msgs int       // messages it counts as (1)
	kind frameKind // what a new subscription does with it
}

// frameKind sorts frames for a new subscription: it replaces everything
// queued of the old one (snapshot, resumed, events), not the replies.
type frameKind uint8

const (
	frameEvent frameKind = iota
	frameSnapshot
	frameResumed
	frameReply // hello, pong, renewed, pings: outlive a new subscription
)

// Coalescing ids of replies: a client gets at most one of each queued.
// Entities are numbered from firstEnt.
const (
	entPing    = 1 + iota // the hub's WebSocket ping
	entPong               // {"op":"pong"}
	entRenewed            // {"op":"renewed"}
	entWSPong             // WebSocket pong to the client's ping
	firstEnt
)

// headerLen is the header size of a frame with an n-byte payload.
func headerLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n <= 0xFFFF:
		return 4
	}
	return 10
}

// putHeader writes a final-frame header for opcode and an n-byte payload
// at the start of b, which must hold headerLen(n) bytes.
func putHeader(b []byte, opcode byte, n int) {
	b[0] = 0x80 | opcode
	switch {
	case n < 126:
		b[1] = byte(n)
	case n <= 0xFFFF:
		b[1] = 126
		b[2], b[3] = byte(n>>8), byte(n)
	default:
		b[1] = 127
		for i := range 8 {
			b[2+i] = byte(uint64(n) >> (56 - 8*i))
		}
	}
}

// newPayload returns a buffer with room for the largest header in front;
// append the payload, then call finish.
func newPayload(size int) []byte { return make([]byte, maxHeader, maxHeader+size) }

// finish frames a payload built after newPayload, in place.
func finish(b []byte, opcode byte) []byte {
	n := len(b) - maxHeader
	h := headerLen(n)
	start := maxHeader - h
	putHeader(b[start:], opcode, n)
	return b[start:]
}

// textFrame frames a text message.
func textFrame(payload []byte) []byte {
	b := append(newPayload(len(payload)), payload...)
	return finish(b, opText)
}

// closeFrame frames a close with a status code and a reason (cut to fit
// the 125-byte control frame limit).
func closeFrame(code int, reason string) []byte {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	b := newPayload(2 + len(reason))
	b = append(b, byte(code>>8), byte(code))
	b = append(b, reason...)
	return finish(b, opClose)
}

var (
	pingBytes = []byte{0x80 | opPing, 0}
	pongBytes = textFrame([]byte(`{"op":"pong"}`))
)

// pongFrame frames a WebSocket pong echoing a ping's data (at most 125
// bytes, which the reader enforces).
func pongFrame(data []byte) []byte {
	b := newPayload(len(data))
	b = append(b, data...)
	return finish(b, opPong)
}

// eventFrame encodes {"op":"event","seq":N,"type":T,"at":MS,"data":DATA}
// with one allocation.
func eventFrame(c *calls.Change, data []byte) []byte { return eventFrameAs(c, c.Type, data) }

// eventFrameAs is eventFrame with the event type typ.
func eventFrameAs(c *calls.Change, typ calls.ChangeType, data []byte) []byte {
	b := appendEventHead(newPayload(64+len(data)), c, typ)
	b = append(b, data...)
	b = append(b, '}')
	return finish(b, opText)
}

// eventPieces is eventFrameAs for data too large to copy (a trunk whole,
// hundreds of KB): the frame's first piece is its header and the event's
// head, then data itself, shared with the engine, then the closing brace.
func eventPieces(c *calls.Change, typ calls.ChangeType, data []byte) (b []byte, more [][]byte) {
	b = appendEventHead(newPayload(64), c, typ)
	n := len(b) - maxHeader + len(data) + 1
	start := maxHeader - headerLen(n)
	putHeader(b[start:], opText, n)
	return b[start:], [][]byte{data, closeBrace}
}

var closeBrace = []byte{'}'}

// appendEventHead appends {"op":"event","seq":N,"type":T,"at":MS,"data":
func appendEventHead(b []byte, c *calls.Change, typ calls.ChangeType) []byte {
	b = append(b, `{"op":"event","seq":`...)
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, `,"type":"`...)
	b = append(b, typ.String()...) // calls' type names need no escaping
	b = append(b, `","at":`...)
	b = strconv.AppendInt(b, c.At, 10)
	return append(b, `,"data":`...)
}

// appendString appends s as a JSON string (calls' encoder).
func appendString(b []byte, s string) []byte { return calls.AppendJSONString(b, s) }

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}
