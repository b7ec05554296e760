package calls

import (
	"maps"
	"slices"
)

// A call centre's queue has 40 members and changes with each of its calls
// (a caller joins and leaves, an agent's CallsTaken moves on). Cloning
// its members and re-encoding them all on each change made a Publish
// cost what the queue held (docs/loadtest.md "The call centre's mix").
// So a queue's members and waiting callers are a cowMap, shared with the
// snapshots until they change, which notes the keys it changed; the
// members' JSON is kept in the queue's memberPieces, one buffer, made
// again from the pieces before when members changed, copying the
// unchanged members' bytes and encoding the changed ones only; the
// queue's JSON, made when a reader wants it whole (a lazy entity), is the
// queue's fields and that buffer, while the feed gets what changed
// (queuedelta.go). A queue's 40 members are few enough for one buffer (a
// trunk's thousand conversations are chunked: convmap.go).

// cowMap is a map that Publish hands out to the snapshots and that is
// copied on the first change after that: written in place until then.
// Its values are pointers, each to a value never written (a change
// stores a new one), so the copy is of pointers, not of the members'
// values, and the snapshots share the members that did not change.
type cowMap[V comparable] struct {
	m      map[string]*V
	shared bool // a snapshot holds m: copy it before writing
	dirty  bool // changed since publish last handed it out
	// keys are the keys set or deleted in the changes publish last
	// reported or is to report (a key may be there twice), while there
	// are at most cowKeysMax; many: there were more, or the map is new,
	// and keys is not kept.
	keys []string
	many bool
}

// cowKeysMax is how many changed keys a cowMap keeps: a Publish re-encodes
// the pieces of those (memberPieces.apply), of more all (update).
const cowKeysMax = 16

func newCowMap[V comparable]() cowMap[V] {
	return cowMap[V]{m: map[string]*V{}, dirty: true, many: true}
}

// get is the value under k, and whether there is one.
func (c *cowMap[V]) get(k string) (V, bool) {
	if p := c.m[k]; p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// own makes m the map's to write, and notes that k changes.
func (c *cowMap[V]) own(k string) {
	if !c.dirty { // the first change since publish
		clear(c.keys)
		c.keys, c.many, c.dirty = c.keys[:0], false, true
	}
	if c.shared {
		c.m, c.shared = maps.Clone(c.m), false
	}
	switch {
	case c.many:
	case len(c.keys) == cowKeysMax:
		clear(c.keys)
		c.keys, c.many = c.keys[:0], true
	default:
		c.keys = append(c.keys, k)
	}
}

// set stores v under k; storing what k holds already changes nothing.
func (c *cowMap[V]) set(k string, v V) {
	if old := c.m[k]; old != nil && *old == v {
		return
	}
	c.own(k)
	c.m[k] = &v
}

func (c *cowMap[V]) del(k string) {
	if _, ok := c.m[k]; !ok {
		return
	}
	c.own(k)
	delete(c.m, k)
}

// publish hands the map out (the caller's to keep, never written again)
// and says whether it changed since it was last handed out.
func (c *cowMap[V]) publish() (map[string]*V, bool) {
	d := c.dirty
	c.shared, c.dirty = true, false
	return c.m, d
}

// changes are the keys changed between the last two times the map was
// handed out (publish said it changed), and false when they are not known
// (too many: any key may have changed). Valid until the next change.
func (c *cowMap[V]) changes() ([]string, bool) { return c.keys, !c.many }

// memberPieces is a queue's members' JSON, the object appendMembers
// writes ({"key":{...},...}: a member shows no number, so every class
// writes the same bytes), in one buffer, with where each member's piece
// ends: a queue's JSON copies it whole, and pieces made for changed
// members copy the unchanged members' bytes from the pieces before, in
// order, encoding only the changed ones. Immutable once made.
type memberPieces struct {
	m    map[string]*QueueMember // the members they are of (a published map, never written)
	keys []string                // m's keys, sorted; shared with the pieces before while no member came or went
	ends []int32                 // ends[i]: where keys[i]'s piece ends in buf (its comma, or the closing brace)
	buf  []byte
	// encoded is how many members making them encoded (tests).
	encoded int
}

func appendMemberPiece(b []byte, k string, mb *QueueMember) []byte {
	return appendMember(append(appendString(b, k), ':'), mb)
}

// update is the pieces of members m, any of which may have changed since
// old's (nil: none made yet).
func (old *memberPieces) update(m map[string]*QueueMember) *memberPieces {
	sorted := sortedKeys(m)
	var diff []string
	for _, k := range sorted {
		if old == nil {
			break
		}
		if was := old.m[k]; was == nil || *was != *m[k] {
			diff = append(diff, k)
		}
	}
	return old.made(m, sorted, diff)
}

// apply is the pieces of members m, which are old's members but for
// those under keys (changed, added or removed; a key may be there
// twice): only those looked up and, when changed, encoded. old is not
// written (a snapshot's Queue may hold it).
func (old *memberPieces) apply(m map[string]*QueueMember, keys []string) *memberPieces {
	var diff []string // the keys whose member is not what old has
	sorted, copied := old.keys, false
	for n, k := range keys {
		if slices.Contains(keys[:n], k) {
			continue
		}
		mb, was := m[k], old.m[k]
		ok, had := mb != nil, was != nil
		if ok == had && (!ok || *mb == *was) {
			continue // changed and changed back
		}
		diff = append(diff, k)
		if ok != had { // came or went
			if !copied {
				sorted, copied = slices.Clone(sorted), true
			}
			i, _ := slices.BinarySearch(sorted, k)
			if ok {
				sorted = slices.Insert(sorted, i, k)
			} else {
				sorted = slices.Delete(sorted, i, i+1)
			}
		}
	}
	if len(diff) == 0 {
		return &memberPieces{m: m, keys: old.keys, ends: old.ends, buf: old.buf}
	}
	slices.Sort(diff)
	return old.made(m, sorted, diff)
}

// made is the pieces of members m, whose keys are sorted: old's bytes for
// a member old has and that is not under diff (sorted), the others
// encoded (all of them when old is nil), in a buffer of their own sized
// from old's (the snapshots keep it: the queue's JSON is made from it
// when a reader wants it).
func (old *memberPieces) made(m map[string]*QueueMember, sorted, diff []string) *memberPieces {
	p := &memberPieces{m: m, keys: sorted, ends: make([]int32, 0, len(sorted))}
	size := memberPieceSize * len(sorted)
	if old != nil {
		size = old.jsonLen() + memberPieceSize*max(len(sorted)-len(old.keys), 1)
	}
	b := append(make([]byte, 0, size), '{')
	j, d := 0, 0 // in old.keys, in diff
	for i, k := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		for d < len(diff) && diff[d] < k {
			d++
		}
		if old != nil && (d == len(diff) || diff[d] != k) {
			for old.keys[j] < k { // old has k: not under diff, not added
				j++
			}
			b = append(b, old.piece(j)...)
		} else {
			b = appendMemberPiece(b, k, m[k])
			p.encoded++
		}
		p.ends = append(p.ends, int32(len(b)))
	}
	p.buf = append(b, '}')
	return p
}

// memberPieceSize is about what a member's piece takes.
const memberPieceSize = 224

// piece is member i's `"key":{...}`.
func (p *memberPieces) piece(i int) []byte {
	start := int32(1)
	if i > 0 {
		start = p.ends[i-1] + 1
	}
	return p.buf[start:p.ends[i]]
}

// of reports whether p are the pieces of members m: they are when the
// engine's view made them together, and a Queue whose members are
// changed elsewhere (Multi's qualifyQueue) drops them. The lengths are
// checked against a Queue copied with other members all the same.
func (p *memberPieces) of(m map[string]*QueueMember) bool {
	return p != nil && len(p.m) == len(m)
}

// jsonLen is the length of the members object appendJSON writes.
func (p *memberPieces) jsonLen() int { return len(p.buf) }

// appendJSON writes the members object from the pieces.
func (p *memberPieces) appendJSON(b []byte) []byte { return append(b, p.buf...) }
