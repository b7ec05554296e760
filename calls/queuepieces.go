package calls

import "maps"

// A call centre's queue has 40 members and changes with each of its calls
// (a caller joins and leaves, an agent's CallsTaken moves on). Cloning
// its members and re-encoding them all on each change made a Publish
// cost what the queue held (docs/loadtest.md "The call centre's mix").
// So a queue's members and waiting callers are a cowMap, shared with the
// snapshots until they change, and each member's JSON is kept in the
// queue's memberPieces, re-encoded only when the member changed; the
// queue's JSON is put together from the pieces. A queue's 40 members are
// few enough to keep in one sorted slice (a trunk's thousand conversations
// are chunked: convmap.go).

// cowMap is a map that Publish hands out to the snapshots and that is
// copied on the first change after that: written in place until then.
type cowMap[V comparable] struct {
	m      map[string]V
	shared bool // a snapshot holds m: copy it before writing
	dirty  bool // changed since publish last handed it out
}

func newCowMap[V comparable]() cowMap[V] { return cowMap[V]{m: map[string]V{}, dirty: true} }

func (c *cowMap[V]) own() {
	c.dirty = true
	if c.shared {
		c.m, c.shared = maps.Clone(c.m), false
	}
}

// set stores v under k; storing what k holds already changes nothing.
func (c *cowMap[V]) set(k string, v V) {
	if old, ok := c.m[k]; ok && old == v {
		return
	}
	c.own()
	c.m[k] = v
}

func (c *cowMap[V]) del(k string) {
	if _, ok := c.m[k]; !ok {
		return
	}
	c.own()
	delete(c.m, k)
}

// publish hands the map out (the caller's to keep, never written again)
// and says whether it changed since it was last handed out.
func (c *cowMap[V]) publish() (map[string]V, bool) {
	d := c.dirty
	c.shared, c.dirty = true, false
	return c.m, d
}

// memberPieces is a queue's members in key order, each with its JSON,
// `"key":{...}` as appendQueue writes it (a member shows no number, so
// every class writes the same bytes). Immutable once made: a Publish
// that changes members makes new pieces sharing the unchanged members'
// bytes.
type memberPieces struct {
	m     map[string]QueueMember // the members they are of (a published map, never written)
	items []memberPiece
	size  int // the pieces' bytes, commas between them included
}

type memberPiece struct {
	key  string
	json []byte
}

func encodeMemberPiece(k string, mb *QueueMember) []byte {
	b := appendString(make([]byte, 0, 48+len(k)+len(mb.Member)+len(mb.Name)+len(mb.PausedReason)+160), k)
	return appendMember(append(b, ':'), mb)
}

// update is the pieces of members m: old's bytes where a member is as
// old has it, the others encoded. old may be nil.
func (old *memberPieces) update(m map[string]QueueMember) *memberPieces {
	var prev []memberPiece
	var was map[string]QueueMember
	if old != nil {
		prev, was = old.items, old.m
	}
	p := &memberPieces{m: m, items: make([]memberPiece, 0, len(m))}
	for _, it := range prev {
		if _, ok := m[it.key]; ok {
			p.items = append(p.items, memberPiece{key: it.key})
		}
	}
	if len(p.items) != len(m) { // members were added: sort them in
		p.items = p.items[:0]
		for _, k := range sortedKeys(m) {
			p.items = append(p.items, memberPiece{key: k})
		}
	}
	j := 0
	for i := range p.items {
		it := &p.items[i]
		for j < len(prev) && prev[j].key < it.key {
			j++
		}
		mb := m[it.key]
		if j < len(prev) && prev[j].key == it.key && was[it.key] == mb {
			it.json = prev[j].json
		} else {
			it.json = encodeMemberPiece(it.key, &mb)
		}
		p.size += len(it.json) + 1
	}
	return p
}

// of reports whether p are the pieces of members m: they are when the
// engine's view made them together, and a Queue whose members are
// changed elsewhere (Multi's qualifyQueue) drops them. The lengths are
// checked against a Queue copied with other members all the same.
func (p *memberPieces) of(m map[string]QueueMember) bool {
	return p != nil && len(p.m) == len(m)
}

// appendJSON writes the members object from the pieces.
func (p *memberPieces) appendJSON(b []byte) []byte {
	b = append(b, '{')
	for i, it := range p.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it.json...)
	}
	return append(b, '}')
}
