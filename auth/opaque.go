package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"sync/atomic"

	"github.com/ctibridge/ctibridge/calls"
)

// Opaque names. A channel name can hold a number (a Local channel is named
// after what was dialled, a trunk endpoint may be named after its DID), so
// a view that hides a call's numbers shows its channels by a keyed hash:
// the same channel has the same opaque name in every read, WebSocket frame
// and conversation id of this process, so a client can still match a
// conversation across updates and between its two parties, and actions
// accept the opaque names back (rest resolves them against the snapshot).
// The key is random per process (or shared by the nodes of one PBX:
// SetOpaqueKey), so the names cannot be inverted by
// hashing guessed numbers, and they change when the bridge restarts (as
// channels do not outlive the bridge's view of them anyway).

// opaquePrefix starts every opaque channel name; no Asterisk channel
// technology starts with it.
const opaquePrefix = "~"

var opaqueKey atomic.Pointer[[32]byte]

func init() {
	var k [32]byte
	rand.Read(k[:])
	opaqueKey.Store(&k)
}

// SetOpaqueKey replaces the random per-process key: nodes serving the same
// PBX (package bus) share one, so that an opaque id a client got from one
// of them means the same channel on the others. Call it before serving.
func SetOpaqueKey(k [32]byte) { opaqueKey.Store(&k) }

// Opaquer writes opaque channel names; it is the calls.Opaquer the engine
// encodes the NumbersHidden class with (cmd/ctibridge sets
// calls.Config.Opaque to it).
type Opaquer struct{}

// AppendChannel appends the opaque name of channel name.
func (Opaquer) AppendChannel(b []byte, name string) []byte { return appendOpaqueChannel(b, name) }

// OpaqueChannel is the opaque name of channel name ("" stays "").
func OpaqueChannel(name string) string {
	return string(appendOpaqueChannel(nil, name))
}

// OpaqueConvID is the opaque form of a conversation id "<caller
// channel>><callee channel>": each side by OpaqueChannel, the ">" kept.
func OpaqueConvID(id string) string {
	return string(calls.AppendOpaqueConvID(nil, Opaquer{}, id))
}

// IsOpaque reports whether s is an opaque channel name or conversation id
// (as a client may send it back in an action).
func IsOpaque(s string) bool {
	return strings.HasPrefix(s, opaquePrefix) || strings.HasPrefix(s, ">"+opaquePrefix)
}

// appendOpaqueChannel appends "~" and 20 hex digits (80 bits of a keyed
// SHA-256) of name; the hex digits need no JSON escaping.
func appendOpaqueChannel(b []byte, name string) []byte {
	if name == "" {
		return b
	}
	h := sha256.New()
	h.Write(opaqueKey.Load()[:])
	h.Write([]byte(name))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	b = append(b, opaquePrefix...)
	const hex = "0123456789abcdef"
	for _, c := range sum[:10] {
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return b
}
