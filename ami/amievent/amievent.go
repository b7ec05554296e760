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
	"sync"

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
	return appendHead(make([]ami.Header, 0, n), name, privilege)
}

// appendHead appends the Event and Privilege headers.
func appendHead(hs []ami.Header, name, privilege string) []ami.Header {
	return append(hs, ami.Header{Key: "Event", Value: name}, ami.Header{Key: "Privilege", Value: privilege})
}

// The keys of a channel's and of a bridge's block, in Asterisk's order.
var (
	chanKeys   = []string{"Channel", "ChannelState", "ChannelStateDesc", "CallerIDNum", "CallerIDName", "ConnectedLineNum", "ConnectedLineName", "Language", "AccountCode", "Context", "Exten", "Priority", "Uniqueid", "Linkedid"}
	bridgeKeys = []string{"BridgeUniqueid", "BridgeType", "BridgeTechnology", "BridgeCreator", "BridgeName", "BridgeNumChannels", "BridgeVideoSourceMode"}
)

// Prefixed keys by block and prefix: the few prefixes (Dest, LocalOne,
// Transferee, ...) are joined to the keys once, not at every event.
var chanPrefixed, bridgePrefixed sync.Map // prefix -> []string

// keysOf is keys, each prefixed.
func keysOf(m *sync.Map, keys []string, prefix string) []string {
	if prefix == "" {
		return keys
	}
	if ks, ok := m.Load(prefix); ok {
		return ks.([]string)
	}
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = prefix + k
	}
	m.Store(prefix, ks)
	return ks
}

// AppendChannel appends c's snapshot block, every key prefixed (Dest,
// Transferee, LocalOne, ... or "").
func AppendChannel(hs []ami.Header, prefix string, c *Channel) []ami.Header {
	k := keysOf(&chanPrefixed, chanKeys, prefix)
	return append(hs,
		ami.Header{Key: k[0], Value: c.Name},
		ami.Header{Key: k[1], Value: strconv.Itoa(c.State)},
		ami.Header{Key: k[2], Value: StateDesc(c.State)},
		ami.Header{Key: k[3], Value: OrUnknown(c.Num)},
		ami.Header{Key: k[4], Value: OrUnknown(c.CIDName)},
		ami.Header{Key: k[5], Value: OrUnknown(c.Conn)},
		ami.Header{Key: k[6], Value: OrUnknown(c.ConnName)},
		ami.Header{Key: k[7], Value: "en"},
		ami.Header{Key: k[8], Value: c.Account},
		ami.Header{Key: k[9], Value: c.Context},
		ami.Header{Key: k[10], Value: c.Exten},
		ami.Header{Key: k[11], Value: strconv.Itoa(c.Priority)},
		ami.Header{Key: k[12], Value: c.UID},
		ami.Header{Key: k[13], Value: c.Linked},
	)
}

// AppendBridge appends b's block, every key prefixed (To, From, Orig,
// ... or "").
func AppendBridge(hs []ami.Header, prefix string, b *Bridge) []ami.Header {
	k := keysOf(&bridgePrefixed, bridgeKeys, prefix)
	return append(hs,
		ami.Header{Key: k[0], Value: b.ID},
		ami.Header{Key: k[1], Value: b.Type},
		ami.Header{Key: k[2], Value: b.Tech},
		ami.Header{Key: k[3], Value: OrUnknown(b.Creator)},
		ami.Header{Key: k[4], Value: OrUnknown(b.Name)},
		ami.Header{Key: k[5], Value: strconv.Itoa(b.Channels)},
		ami.Header{Key: k[6], Value: "none"},
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

// scratch holds the header slices the events below are built in: the
// message copies its headers, so the slice is reused (a slice an event
// was most of the synthetic PBX's garbage, which a benchmark's garbage
// collector then charged to the engine reading the events).
var scratch = sync.Pool{New: func() any { hs := make([]ami.Header, 0, 64); return &hs }}

// head is Head in a slice from scratch.
func head(name, privilege string) *[]ami.Header {
	p := scratch.Get().(*[]ami.Header)
	*p = appendHead((*p)[:0], name, privilege)
	return p
}

// message is the message of headers hs, built in p, which goes back to
// scratch holding no string.
func message(p *[]ami.Header, hs []ami.Header) ami.Message {
	m := ami.NewMessage(hs...)
	clear(hs)
	*p = hs[:0]
	scratch.Put(p)
	return m
}

// ChannelEvent is a call event about c: its block, then kv.
func ChannelEvent(name string, c *Channel, kv ...string) ami.Message {
	p := head(name, "call,all")
	return message(p, AppendPairs(AppendChannel(*p, "", c), kv...))
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
	p := head(name, privilege)
	hs := *p
	if c != nil {
		hs = AppendChannel(hs, "", c)
	}
	return message(p, AppendPairs(AppendChannel(hs, prefix, d), kv...))
}

// BridgeEvent is a bridge event (BridgeCreate, BridgeEnter, ...): b's
// block, then c's when not nil, then kv.
func BridgeEvent(name string, b *Bridge, c *Channel, kv ...string) ami.Message {
	p := head(name, "call,all")
	hs := AppendBridge(*p, "", b)
	if c != nil {
		hs = AppendChannel(hs, "", c)
	}
	return message(p, AppendPairs(hs, kv...))
}
