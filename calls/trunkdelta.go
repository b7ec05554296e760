package calls

import "sync"

// A trunk's change goes to the feed as what changed in it, a
// trunkConversations change:
//
//	{"name":"trunk","status":"busy","registration":"registered","chanType":"pjsip",
//	 "set":{"<id>":{Conversation},...},"removed":["<id>",...]}
//
// (and "pbx" last, for a named PBX): the trunk's fields, the
// conversations that are new or changed, and the ids of those that
// ended, both in id order. Applied in feed order to the trunk as a
// snapshot holds it, the changes give the trunk as the snapshot of their
// last seq holds it (TestMixPublishDerivesWhatChanged). Its bytes are a
// few conversations', not the trunk's thousand; the whole trunk stays in
// the snapshots (made on first need, convmap.go) and is reachable from
// the change (Change.Whole) while it is the trunk's latest, for readers
// that take a trunk whole (the WebSocket's trunkUpdate).

// trunkDelta is a trunkConversations change's entity. Unlike an entity's
// handle it is never cut: a reader that skipped one would miss what it
// changed.
type trunkDelta struct {
	t       Trunk // the fields (its Conversations unused)
	set     []*convItem
	removed []string
	at      int64
	op      Opaquer // the removed ids' opaque names
	full    []byte
	once    sync.Once
	hid     []byte
	whole   classed // the trunk's entity, cut when it changes again
	// A Publish changes a few of a trunk's conversations: set and removed
	// start in these, inside the delta's own allocation, not in slices
	// grown an append at a time.
	setBuf     [4]*convItem
	removedBuf [4]string
}

// newTrunkDelta is the change from conversations old to v's, whole the
// handle of v's entity.
func newTrunkDelta(old ConvMap, v *Trunk, at int64, op Opaquer, whole classed) *trunkDelta {
	d := &trunkDelta{t: *v, at: at, op: op, whole: whole}
	d.t.Conversations = ConvMap{}
	d.set, d.removed = d.setBuf[:0], d.removedBuf[:0]
	old.diff(v.Conversations, func(it *convItem) { d.set = append(d.set, it) }, func(id string) { d.removed = append(d.removed, id) })
	d.full = d.encode(Full)
	return d
}

func (d *trunkDelta) json(c Class) []byte {
	if c == Full {
		return d.full
	}
	d.once.Do(func() { d.hid = d.encode(c) })
	return d.hid
}

func (d *trunkDelta) encode(c Class) []byte {
	n := 160
	for _, it := range d.set {
		n += len(it.piece(c, d.op).b) + 12
	}
	for _, id := range d.removed {
		n += len(id) + 40
	}
	e := enc{hide: c != Full, op: d.op}
	b := appendSetRemoved(appendTrunkHead(make([]byte, 0, n), &d.t), len(d.set),
		func(b []byte, i int) []byte { return d.set[i].appendAt(b, c, d.op, d.at) }, d.removed, e.convID)
	return append(appendPBX(b, d.t.PBX), '}')
}

// appendSetRemoved writes what a delta changes in its entity's items
// (a trunk's conversations, a queue's members): `"set":{...}`, the n
// items item writes (each `"key":{...}`), then `,"removed":[...]`, each
// key id writes.
func appendSetRemoved(b []byte, n int, item func(b []byte, i int) []byte, removed []string, id func(b []byte, k string) []byte) []byte {
	b = append(appendKey(b, "set"), '{')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, i)
	}
	b = append(b, `},"removed":[`...)
	for i, k := range removed {
		if i > 0 {
			b = append(b, ',')
		}
		b = id(b, k)
	}
	return append(b, ']')
}

func (d *trunkDelta) wholeJSON(c Class) []byte { return d.whole.json(c) }
