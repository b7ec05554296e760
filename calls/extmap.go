package calls

import (
	"iter"
	"maps"
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

type (
	extNodes  [extFan]*extLeaves
	extLeaves [extFan]*extShard
)

type extShard struct {
	vals map[string]Extension
	json map[string][]byte
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
	if n := m.root[i/extFan]; n != nil {
		return n[i%extFan]
	}
	return nil
}

// shards yields the shards that hold something.
func (m ExtensionMap) shards(yield func(*extShard) bool) {
	if m.root == nil {
		return
	}
	for _, n := range m.root {
		if n == nil {
			continue
		}
		for _, s := range n {
			if s != nil && !yield(s) {
				return
			}
		}
	}
}

// Lookup is the extension numbered k, and whether it exists.
func (m ExtensionMap) Lookup(k string) (Extension, bool) {
	if s := m.shard(k); s != nil {
		x, ok := s.vals[k]
		return x, ok
	}
	return Extension{}, false
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
			for k, x := range s.vals {
				if !yield(k, x) {
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
	if s := m.shard(k); s != nil {
		return s.json[k]
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
// during one Publish: what it copied in this Publish it may write in place.
type extWriter struct {
	cur     ExtensionMap
	copied  map[any]bool // the root, nodes and shards copied in this Publish
	keysOwn bool         // cur.keys was copied in this Publish

	pieces *extPieces // cur's collection JSON, as published
	base   *extPieces // the latest assembled pieces, or nil
	dirty  []uint64   // the pieces changed since base
}

func newExtWriter() extWriter {
	w := extWriter{cur: ExtensionMap{root: &extNodes{}}, copied: map[any]bool{}}
	w.pieces = &extPieces{m: w.cur}
	return w
}

// begin starts a Publish: what is published is shared from now on. When
// a reader assembled the published pieces, they become the base the next
// ones reuse.
func (w *extWriter) begin() {
	clear(w.copied)
	w.keysOwn = false
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
func (w *extWriter) changed() bool { return len(w.copied) > 0 }

// set stores extension k's view and JSON, copying the root, the node and
// the shard on its path first if they are still shared with a published
// map.
func (w *extWriter) set(k string, v Extension, b []byte) {
	if !w.copied[w.cur.root] {
		r := *w.cur.root
		w.cur.root = &r
		w.copied[&r] = true
	}
	i := shardOf(k)
	n := w.cur.root[i/extFan]
	if n == nil || !w.copied[n] {
		c := &extLeaves{}
		if n != nil {
			*c = *n
		}
		n, w.cur.root[i/extFan] = c, c
		w.copied[n] = true
	}
	s := n[i%extFan]
	if s == nil || !w.copied[s] {
		c := &extShard{vals: map[string]Extension{}, json: map[string][]byte{}}
		if s != nil {
			c.vals, c.json = maps.Clone(s.vals), maps.Clone(s.json)
		}
		s, n[i%extFan] = c, c
		w.copied[s] = true
	}
	if _, ok := s.vals[k]; !ok {
		if !w.keysOwn { // the published slice is shared: copy it first
			w.cur.keys, w.keysOwn = slices.Clone(w.cur.keys), true
		}
		i, _ := slices.BinarySearch(w.cur.keys, k)
		w.cur.keys = slices.Insert(w.cur.keys, i, k)
		w.base = nil // the keys after it moved to other pieces
	} else if w.base != nil {
		i, _ := slices.BinarySearch(w.cur.keys, k)
		c := i / extPiece
		if c/64 >= len(w.dirty) {
			w.dirty = append(w.dirty, make([]uint64, c/64+1-len(w.dirty))...)
		}
		w.dirty[c/64] |= 1 << (c % 64)
	}
	s.vals[k], s.json[k] = v, b
}
