// Package amievent builds the events of a PBX as Asterisk 22 writes
// them: the Event and Privilege head, the channel snapshot block every
// channel event carries (prefixed, as DestChannel or LocalOneChannel),
// the bridge block, and the channel, dial and bridge events made of
// them. The simulated PBX (pbxsim) and the synthetic one
// (loadtest/synthpbx) both build their events here, so their shapes are
// one piece of code; ami/testdata's recordings are the reference.
package amievent

import (
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
)

// Channel is a channel's snapshot as its events show it. An empty caller
// ID or connected line field is written "<unknown>", as Asterisk does.
type Channel struct {
	Name           string // PJSIP/201-0000000a
	State          int    // 0 Down, 4 Ring, 5 Ringing, 6 Up
	Num, CIDName   string // CallerIDNum, CallerIDName
	Conn, ConnName string // ConnectedLineNum, ConnectedLineName
	Account        string // AccountCode
	Context, Exten string
	Priority       int
	UID, Linked    string // Uniqueid, Linkedid
}

// Bridge is a bridge's snapshot. An empty Creator or Name is written
// "<unknown>".
type Bridge struct {
	ID, Type, Tech string // BridgeUniqueid, BridgeType (basic), BridgeTechnology (simple_bridge)
	Creator, Name  string
	Channels       int // BridgeNumChannels
}

// StateDesc is Asterisk's name of channel state s (ChannelStateDesc).
func StateDesc(s int) string {
	switch s {
	case 0:
		return "Down"
	case 4:
		return "Ring"
	case 5:
		return "Ringing"
	case 6:
		return "Up"
	}
	return "Unknown"
}

// OrUnknown is s, or "<unknown>" when s is empty.
func OrUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// Head starts an event of n headers or so: Event and Privilege.
func Head(name, privilege string, n int) []ami.Header {
	hs := make([]ami.Header, 0, n)
	return append(hs, ami.Header{Key: "Event", Value: name}, ami.Header{Key: "Privilege", Value: privilege})
}

// AppendChannel appends c's snapshot block, every key prefixed (Dest,
// Transferee, LocalOne, ... or "").
func AppendChannel(hs []ami.Header, prefix string, c *Channel) []ami.Header {
	return append(hs,
		ami.Header{Key: prefix + "Channel", Value: c.Name},
		ami.Header{Key: prefix + "ChannelState", Value: strconv.Itoa(c.State)},
		ami.Header{Key: prefix + "ChannelStateDesc", Value: StateDesc(c.State)},
		ami.Header{Key: prefix + "CallerIDNum", Value: OrUnknown(c.Num)},
		ami.Header{Key: prefix + "CallerIDName", Value: OrUnknown(c.CIDName)},
		ami.Header{Key: prefix + "ConnectedLineNum", Value: OrUnknown(c.Conn)},
		ami.Header{Key: prefix + "ConnectedLineName", Value: OrUnknown(c.ConnName)},
		ami.Header{Key: prefix + "Language", Value: "en"},
		ami.Header{Key: prefix + "AccountCode", Value: c.Account},
		ami.Header{Key: prefix + "Context", Value: c.Context},
		ami.Header{Key: prefix + "Exten", Value: c.Exten},
		ami.Header{Key: prefix + "Priority", Value: strconv.Itoa(c.Priority)},
		ami.Header{Key: prefix + "Uniqueid", Value: c.UID},
		ami.Header{Key: prefix + "Linkedid", Value: c.Linked},
	)
}

// AppendBridge appends b's block, every key prefixed (To, From, Orig,
// ... or "").
func AppendBridge(hs []ami.Header, prefix string, b *Bridge) []ami.Header {
	return append(hs,
		ami.Header{Key: prefix + "BridgeUniqueid", Value: b.ID},
		ami.Header{Key: prefix + "BridgeType", Value: b.Type},
		ami.Header{Key: prefix + "BridgeTechnology", Value: b.Tech},
		ami.Header{Key: prefix + "BridgeCreator", Value: OrUnknown(b.Creator)},
		ami.Header{Key: prefix + "BridgeName", Value: OrUnknown(b.Name)},
		ami.Header{Key: prefix + "BridgeNumChannels", Value: strconv.Itoa(b.Channels)},
		ami.Header{Key: prefix + "BridgeVideoSourceMode", Value: "none"},
	)
}

// AppendPairs appends kv's key, value pairs (an odd last key is
// dropped).
func AppendPairs(hs []ami.Header, kv ...string) []ami.Header {
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return hs
}

// ChannelEvent is a call event about c: its block, then kv.
func ChannelEvent(name string, c *Channel, kv ...string) ami.Message {
	return ami.NewMessage(AppendPairs(AppendChannel(Head(name, "call,all", 18+len(kv)/2), "", c), kv...)...)
}

// DialEvent is a DialBegin, DialState or DialEnd of src dialling dst
// (src nil: no channel dialled, as Originate's or a Local half's): src's
// block, dst's prefixed Dest, then kv.
func DialEvent(name string, src, dst *Channel, kv ...string) ami.Message {
	return PairEvent(name, "call,all", src, "Dest", dst, kv...)
}

// PairEvent is an event about two channels (DialBegin, AgentCalled,
// QueueCallerJoin with a nil first, ...): the first's block unprefixed
// when not nil, the second's prefixed, then kv.
func PairEvent(name, privilege string, c *Channel, prefix string, d *Channel, kv ...string) ami.Message {
	hs := Head(name, privilege, 32+len(kv)/2)
	if c != nil {
		hs = AppendChannel(hs, "", c)
	}
	return ami.NewMessage(AppendPairs(AppendChannel(hs, prefix, d), kv...)...)
}

// BridgeEvent is a bridge event (BridgeCreate, BridgeEnter, ...): b's
// block, then c's when not nil, then kv.
func BridgeEvent(name string, b *Bridge, c *Channel, kv ...string) ami.Message {
	hs := AppendBridge(Head(name, "call,all", 24+len(kv)/2), "", b)
	if c != nil {
		hs = AppendChannel(hs, "", c)
	}
	return ami.NewMessage(AppendPairs(hs, kv...)...)
}
