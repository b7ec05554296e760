package calls

import (
	"iter"
	"slices"
	"sync"
	"sync/atomic"
)

// An ExtensionMap is cut into extFan*extFan shards in a two-level tree: a
// Publish that changes k extensions copies the root, at most k nodes and k
// shards (5,000 extensions: about 5 in a shard), not the whole map.
const (
	extFan    = 32
	extShards = extFan * extFan
)

// ExtensionMap is a Snapshot's extensions by number, with their JSON. It
// is immutable: a Publish that changes some extensions makes a new one
// sharing every part it did not change. The zero value is empty.
type ExtensionMap struct {
	root *extNodes
	keys []string // sorted; shared, never written: a new extension makes a new slice
}

// The tree's nodes and shards carry the generation of the writer's
// Publish that copied them: one of the running Publish is the writer's to
// change in place, any other is shared with a published map.
type (
	extNodes struct {
		gen uint64
		n   [extFan]*extLeaves
	}
	extLeaves struct {
		gen uint64
		s   [extFan]*extShard
	}
)

// An extShard holds a few extensions (5,000 in 1,024 shards: about 5),
// sorted by number. A slice, not a map: copying it for a change is one
// allocation and a copy of a few pointers, and a search of a handful of
// keys costs less than hashing.
type extShard struct {
	gen uint64
	e   []extEntry
}

type extEntry struct {
	k string
	v *Extension // never written once published
	b []byte
}

// find is the index of k in s, or where it would go, and whether it is there.
func (s *extShard) find(k string) (int, bool) {
	lo, hi := 0, len(s.e)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.e[m].k < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s.e) && s.e[lo].k == k
}

// get is the entry of k, or nil.
func (s *extShard) get(k string) *extEntry {
	if s == nil {
		return nil
	}
	if i, ok := s.find(k); ok {
		return &s.e[i]
	}
	return nil
}

func shardOf(k string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return int(h % extShards)
}

// shard is the shard holding k, or nil when it is empty.
func (m ExtensionMap) shard(k string) *extShard {
	if m.root == nil {
		return nil
	}
	i := shardOf(k)
	if n := m.root.n[i/extFan]; n != nil {
		return n.s[i%extFan]
	}
	return nil
}

// shards yields the shards that hold something.
func (m ExtensionMap) shards(yield func(*extShard) bool) {
	if m.root == nil {
		return
	}
	for _, n := range m.root.n {
		if n == nil {
			continue
		}
		for _, s := range n.s {
			if s != nil && !yield(s) {
				return
			}
		}
	}
}

// Lookup is the extension numbered k, and whether it exists.
func (m ExtensionMap) Lookup(k string) (Extension, bool) {
	if x := m.ptr(k); x != nil {
		return *x, true
	}
	return Extension{}, false
}

// ptr is the extension numbered k, or nil; it must not be written.
func (m ExtensionMap) ptr(k string) *Extension {
	if en := m.shard(k).get(k); en != nil {
		return en.v
	}
	return nil
}

// Get is the extension numbered k, or the zero Extension.
func (m ExtensionMap) Get(k string) Extension {
	x, _ := m.Lookup(k)
	return x
}

// Len is how many extensions there are.
func (m ExtensionMap) Len() int { return len(m.keys) }

// All yields every extension, in no particular order.
func (m ExtensionMap) All() iter.Seq2[string, Extension] {
	return func(yield func(string, Extension) bool) {
		for s := range m.shards {
			for _, en := range s.e {
				if !yield(en.k, *en.v) {
					return
				}
			}
		}
	}
}

// Keys is every extension number, sorted, in a slice of the caller's.
func (m ExtensionMap) Keys() []string { return slices.Clone(m.keys) }

// json is extension k's JSON, or nil.
func (m ExtensionMap) json(k string) []byte {
	if en := m.shard(k).get(k); en != nil {
		return en.b
	}
	return nil
}

// extPiece is how many extensions one piece of the collection JSON holds
// (5,000 extensions with 2,000 calls up: 5 pieces of about 560 KB). Each
// piece is one more write system call per REST response: with 128 (40
// pieces) a read of 5,000 extensions with no change cost 0.63-0.73 ms of
// CPU against 0.45-0.56 for one contiguous body, with 1,024 0.51-0.58
// (docs/loadtest.md).
const extPiece = 1024

// extPieces is an ExtensionMap's collection JSON, {"201":{...},...} in key
// order, cut into pieces of extPiece keys: the first piece starts with
// "{", the others with their comma, the last ends with "}". A reader writes the pieces one
// after the other; a change re-encodes the piece holding it and shares
// the others with the pieces made before (base), so the first read after a
// change copies one piece, not the whole collection.
type extPieces struct {
	once  sync.Once
	m     ExtensionMap
	base  *extPieces // made earlier and assembled (done); nil: none usable
	dirty []uint64   // bit c: piece c may differ from base's
	done  atomic.Bool
	parts [][]byte
}

// get assembles the pieces once, reusing base's unchanged ones.
func (p *extPieces) get() [][]byte {
	p.once.Do(func() {
		keys := p.m.keys
		n := (len(keys) + extPiece - 1) / extPiece
		var old [][]byte
		if p.base != nil {
			old = p.base.get()
		}
		if n == 0 {
			p.parts = [][]byte{[]byte("{}")}
		} else {
			p.parts = make([][]byte, n)
		}
		for c := range n {
			if old != nil && !p.changed(c) {
				p.parts[c] = old[c]
				continue
			}
			p.parts[c] = p.m.appendPiece(keys[c*extPiece:min((c+1)*extPiece, len(keys))], c == 0, c == n-1)
		}
		p.base, p.dirty = nil, nil // no chain of old versions
		p.done.Store(true)
	})
	return p.parts
}

func (p *extPieces) changed(c int) bool {
	return c/64 < len(p.dirty) && p.dirty[c/64]&(1<<(c%64)) != 0
}

// appendPiece encodes "201":{...},"202":{...} for keys, after "{" if
// first or else a comma, and before "}" if last.
func (m ExtensionMap) appendPiece(keys []string, first, last bool) []byte {
	n := 1
	for _, k := range keys {
		n += len(k) + 4 + len(m.json(k))
	}
	b := make([]byte, 0, n)
	for i, k := range keys {
		switch {
		case i > 0 || !first:
			b = append(b, ',')
		default:
			b = append(b, '{')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, m.json(k)...)
	}
	if last {
		b = append(b, '}')
	}
	return b
}

// joinPieces is the pieces in one slice.
func joinPieces(parts [][]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// extWriter is the engine's copy-on-write of the published ExtensionMap
// during one Publish: what it copied in this Publish (a node or shard of
// generation gen) it may write in place.
type extWriter struct {
	cur     ExtensionMap
	gen     uint64 // this Publish's; 0 is never one
	changes bool   // set was called in this Publish
	keysOwn bool   // cur.keys was copied in this Publish

	// shows indexes cur by the numbers its conversations show: counterpart
	// number -> extension -> how many of its conversations show it. A
	// renamed extension re-derives the extensions showing its number
	// from it (markShowing) instead of scanning every busy one.
	shows map[string]map[string]int

	pieces *extPieces // cur's collection JSON, as published
	base   *extPieces // the latest assembled pieces, or nil
	dirty  []uint64   // the pieces changed since base
}

func newExtWriter() extWriter {
	w := extWriter{cur: ExtensionMap{root: &extNodes{}}, gen: 1, shows: map[string]map[string]int{}}
	w.pieces = &extPieces{m: w.cur}
	return w
}

// begin starts a Publish: what is published is shared from now on. When
// a reader assembled the published pieces, they become the base the next
// ones reuse.
func (w *extWriter) begin() {
	w.gen++
	w.changes, w.keysOwn = false, false
	if w.pieces.done.Load() && w.pieces != w.base {
		w.base = w.pieces
		clear(w.dirty)
	}
}

// published is the collection JSON of cur: the previous one when this
// Publish changed nothing.
func (w *extWriter) published() *extPieces {
	if w.changed() {
		w.pieces = &extPieces{m: w.cur, base: w.base, dirty: slices.Clone(w.dirty)}
	}
	return w.pieces
}

// changed reports whether set was called in this Publish.
func (w *extWriter) changed() bool { return w.changes }

// index counts (d 1) or uncounts (d -1) the numbers x's conversations
// show.
func (w *extWriter) index(k string, x *Extension, d int) {
	for _, cv := range x.Conversations {
		n := cv.CounterpartNum
		if n == "" {
			continue
		}
		m := w.shows[n]
		if m == nil {
			m = map[string]int{}
			w.shows[n] = m
		}
		if m[k] += d; m[k] <= 0 {
			delete(m, k)
			if len(m) == 0 {
				delete(w.shows, n)
			}
		}
	}
}

// showing yields the extensions a conversation of which shows number n.
func (w *extWriter) showing(n string) map[string]int { return w.shows[n] }

// set stores extension k's view and JSON, copying the root, the node and
// the shard on its path first if they are still shared with a published
// map. v is kept: the caller must not write it afterwards.
func (w *extWriter) set(k string, v *Extension, b []byte) {
	w.changes = true
	if w.cur.root.gen != w.gen {
		r := *w.cur.root
		r.gen = w.gen
		w.cur.root = &r
	}
	i := shardOf(k)
	n := w.cur.root.n[i/extFan]
	if n == nil || n.gen != w.gen {
		c := &extLeaves{gen: w.gen}
		if n != nil {
			c.s = n.s
		}
		n, w.cur.root.n[i/extFan] = c, c
	}
	s := n.s[i%extFan]
	if s == nil || s.gen != w.gen {
		c := &extShard{gen: w.gen}
		if s != nil {
			c.e = make([]extEntry, len(s.e), len(s.e)+1)
			copy(c.e, s.e)
		}
		s, n.s[i%extFan] = c, c
	}
	j, ok := s.find(k)
	if ok {
		w.index(k, s.e[j].v, -1)
	}
	w.index(k, v, 1)
	if !ok {
		if !w.keysOwn { // the published slice is shared: copy it first
			w.cur.keys, w.keysOwn = slices.Clone(w.cur.keys), true
		}
		i, _ := slices.BinarySearch(w.cur.keys, k)
		w.cur.keys = slices.Insert(w.cur.keys, i, k)
		w.base = nil // the keys after it moved to other pieces
		s.e = slices.Insert(s.e, j, extEntry{k: k})
	} else if w.base != nil {
		i, _ := slices.BinarySearch(w.cur.keys, k)
		c := i / extPiece
		if c/64 >= len(w.dirty) {
			w.dirty = append(w.dirty, make([]uint64, c/64+1-len(w.dirty))...)
		}
		w.dirty[c/64] |= 1 << (c % 64)
	}
	s.e[j].v, s.e[j].b = v, b
}
