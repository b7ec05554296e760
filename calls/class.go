package calls

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
)

// Visibility classes (docs/design.md "Users and permissions"). Every
// entity is encoded once per class a reader can have: Full at Publish,
// NumbersHidden on first need (a sync.Once beside the full bytes, so an
// engine without filtered readers never makes it). The encoders write
// each class field by field (json.go), so whether a field shows a number
// is decided where the field is written; REST and the WebSocket hub pick
// the bytes of their reader's class and never parse or rewrite JSON.

// Class is how much of a call's details a reader may see.
type Class uint8

const (
	// Full shows everything.
	Full Class = iota
	// NumbersHidden blanks the numbers and names of the other party
	// (counterpartNum and counterpartName, a spied extension, who parked
	// a call, waiting and parked callers' num and name, conference
	// members' extenId and name) and shows channel names and conversation
	// ids by their opaque names (Config.Opaque). Uniqueids (callId,
	// linkedId, uniqueId, a transfer's id, a conference member's id) name
	// no one and are kept; presence is never hidden.
	NumbersHidden
	numClasses
)

// Opaquer writes the opaque name of a channel (auth.Opaquer: a keyed
// hash), for the NumbersHidden class: a channel name can hold a number
// (Local/0612345678@from-internal-…;1, a trunk named after its DID), while
// clients still need stable ids. What AppendChannel appends must need no
// JSON escaping, and "" must stay "".
type Opaquer interface {
	AppendChannel(b []byte, name string) []byte
}

// AppendOpaqueConvID appends the opaque form of a conversation id
// "<caller channel>><callee channel>": each side by o, the ">" kept. A nil
// o leaves both sides empty.
func AppendOpaqueConvID(b []byte, o Opaquer, id string) []byte {
	caller, callee, two := strings.Cut(id, ">")
	b = appendOpaqueChannel(b, o, caller)
	if !two {
		return b
	}
	b = append(b, '>')
	return appendOpaqueChannel(b, o, callee)
}

func appendOpaqueChannel(b []byte, o Opaquer, name string) []byte {
	if o == nil {
		return b // no opaque names configured: nothing of the name
	}
	return o.AppendChannel(b, name)
}

// enc is how an encoder writes one class.
type enc struct {
	hide bool
	op   Opaquer
}

// secret appends s as a JSON string, blank when the class hides numbers.
func (e enc) secret(b []byte, s string) []byte {
	if e.hide {
		return append(b, '"', '"')
	}
	return appendString(b, s)
}

// channel appends a channel name as a JSON string, by its opaque name
// when the class hides numbers.
func (e enc) channel(b []byte, name string) []byte { return e.opaqued(b, name, false) }

// convID appends a conversation id as a JSON string, opaque when the
// class hides numbers.
func (e enc) convID(b []byte, id string) []byte { return e.opaqued(b, id, true) }

func (e enc) opaqued(b []byte, s string, conv bool) []byte {
	if !e.hide {
		return appendString(b, s)
	}
	b = append(b, '"')
	if conv {
		b = AppendOpaqueConvID(b, e.op, s)
	} else {
		b = appendOpaqueChannel(b, e.op, s)
	}
	return append(b, '"')
}

// encoder writes one entity of type V in class e; at is the time it is
// encoded at (conversations' durations).
type encoder[V any] func(b []byte, v *V, at int64, e enc) []byte

// ent is one published entity: its value and its JSON per class, shared
// by every snapshot (and feed change) until the entity changes.
type ent[V any] struct {
	v      V
	full   []byte
	at     int64
	encode encoder[V]
	op     Opaquer
	once   sync.Once
	hid    []byte
	feed   *feedRef[V] // the handle of the entity's latest Change
	// from is the engine's entity whose value and bytes these are (Multi,
	// the default PBX): its NumbersHidden JSON is shared, not made again.
	from *ent[V]
	// whole, when not nil, holds the full JSON made on first need instead
	// of full (a trunk: put together from its conversations' pieces only
	// when a reader wants it whole, newLazyEnt).
	whole *lazy
}

// newLazyEnt is v's entity, its JSON in every class made on first need;
// the entity and its lazy whole are one allocation.
func newLazyEnt[V any](v V, at int64, op Opaquer, encode encoder[V]) *ent[V] {
	x := &struct {
		x ent[V]
		w lazy
	}{x: ent[V]{v: v, at: at, encode: encode, op: op}}
	x.x.whole = &x.w
	return &x.x
}

// feedRef is how a feed Change reaches its entity's NumbersHidden JSON.
// The engine cuts it when the entity changes again, so the feed (10,000
// changes by default) keeps no superseded entity value alive, only its
// full bytes: retaining them cost every Publish garbage-collector work.
// A reader finding it cut skips the change for a filtered client: a newer
// change of the same entity follows in the feed.
type feedRef[V any] struct {
	p atomic.Pointer[ent[V]]
	// keep, when not nil, is the value as the Change announced it, never
	// cut (announceKeeping): an extension's, for readers that follow
	// every state of it (Change.Extension).
	keep *V
	// hangups: an extension's, the conversations its Change drops by
	// their channel's Hangup (Change.Hangups).
	hangups []Hangup
}

func (r *feedRef[V]) json(c Class) []byte { return r.p.Load().json(c) }

// announce is the handle x's Change carries; it cuts old's (the value x
// replaces, nil for a new entity).
func (x *ent[V]) announce(old *ent[V]) classed {
	if old != nil && old.feed != nil {
		old.feed.p.Store(nil)
	}
	x.feed = &feedRef[V]{}
	x.feed.p.Store(x)
	return x.feed
}

// announceKeeping is announce, the handle also keeping x's value for the
// Change's readers whatever follows (Change.Extension): an extension's
// value is small, unlike a trunk's or a queue's.
func (x *ent[V]) announceKeeping(old *ent[V]) classed {
	h := x.announce(old).(*feedRef[V])
	h.keep = &x.v
	return h
}

// refreshed is x, re-encoded by a duration refresh as y: y inherits x's
// handle, which still leads to the entity as its Change announced it.
func (x *ent[V]) refreshed(y *ent[V]) *ent[V] {
	if x != nil {
		y.feed = x.feed
	}
	return y
}

// newEnt encodes v in full; hint is the expected size.
func newEnt[V any](v V, at int64, op Opaquer, encode encoder[V], hint int) *ent[V] {
	x := &ent[V]{v: v, at: at, encode: encode, op: op}
	x.full = encode(make([]byte, 0, hint), &x.v, at, enc{})
	return x
}

// newEntCopied is newEnt encoding in *scratch, a buffer the caller keeps
// across calls, and keeping a copy at its size: one allocation and no
// growing, whatever the size (publishExts: an extension's JSON grows and
// shrinks with its calls, so the previous size is a poor hint).
func newEntCopied[V any](v V, at int64, op Opaquer, encode encoder[V], scratch *[]byte) *ent[V] {
	x := &ent[V]{v: v, at: at, encode: encode, op: op}
	*scratch = encode((*scratch)[:0], &x.v, at, enc{})
	x.full = bytes.Clone(*scratch)
	return x
}

// json is the entity's JSON in class c (nil for a nil entity).
func (x *ent[V]) json(c Class) []byte {
	if x == nil {
		return nil
	}
	if c == Full {
		if w := x.whole; w != nil {
			w.once.Do(func() { w.b = x.encode(nil, &x.v, x.at, enc{}) })
			return w.b
		}
		return x.full
	}
	if x.from != nil {
		return x.from.json(c)
	}
	x.once.Do(func() { x.hid = x.encode(make([]byte, 0, len(x.full)), &x.v, x.at, enc{hide: true, op: x.op}) })
	return x.hid
}

// size is the length of the entity's full JSON, a hint for the next one.
func (x *ent[V]) size() int {
	if x == nil {
		return 0
	}
	return len(x.full)
}

// classed is an entity's JSON by class, as a Change carries it.
type classed interface{ json(Class) []byte }
