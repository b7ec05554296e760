package calls

import (
	"iter"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
)

// An ExtensionMap is cut into extShards shards in a two-level tree: a
// Publish that changes k extensions copies the root, at most k nodes and k
// shards (5,000 extensions: about 5 in a shard), not the whole map. A
// wide root and narrow nodes: the root is copied once per Publish, a node
// per changed extension (the mix: 11 a Publish), so 128 by 8 copies less
// a Publish than a square tree (docs/performance.md).
const (
	extRootFan = 128
	extLeafFan = 8
	extShards  = extRootFan * extLeafFan
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
		n   [extRootFan]*extLeaves
	}
	extLeaves struct {
		gen uint64
		s   [extLeafFan]*extShard
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

// An extEntry is one extension: its number and its published entity
// (value, full JSON, hidden JSON made on first need), shared with every
// map holding it until it changes.
type extEntry struct {
	k string
	x *ent[Extension]
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

// at is find(k), k's entry found by its entity x when x is in s.
func (s *extShard) at(k string, x *ent[Extension]) (int, bool) {
	if x != nil {
		for j := range s.e {
			if s.e[j].x == x {
				return j, true
			}
		}
	}
	return s.find(k)
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
	if n := m.root.n[i/extLeafFan]; n != nil {
		return n.s[i%extLeafFan]
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
	if x := m.ent(k); x != nil {
		return x.v, true
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
			for _, en := range s.e {
				if !yield(en.k, en.x.v) {
					return
				}
			}
		}
	}
}

// Keys is every extension number, sorted, in a slice of the caller's.
func (m ExtensionMap) Keys() []string { return slices.Clone(m.keys) }

// ent is extension k, or nil.
func (m ExtensionMap) ent(k string) *ent[Extension] {
	s := m.shard(k)
	if s == nil {
		return nil
	}
	if i, ok := s.find(k); ok {
		return s.e[i].x
	}
	return nil
}

// extPiece is how many extensions one piece of the collection JSON holds.
// Pieces let versions share what did not change, but each piece is one
// more write system call per REST response: small pieces made a read with
// no change dearer than one contiguous body, 1,024 costs about the same
// (docs/performance.md).
const extPiece = 1024

// extPieces is an ExtensionMap's collection JSON, {"201":{...},...} in key
// order, cut into pieces of extPiece keys: the first piece starts with
// "{", the others with their comma, the last ends with "}". A reader writes the pieces one
// after the other; a change re-encodes the piece holding it and shares
// the others with the pieces made before (base), so the first read after a
// change copies one piece, not the whole collection. There is one per
// class; the NumbersHidden pieces also note where each extension's JSON
// is in them (ExtensionsFor cuts them there).
type extPieces struct {
	once  sync.Once
	m     ExtensionMap
	cls   Class
	base  *extPieces // made earlier and assembled (done); nil: none usable
	dirty []uint64   // bit c: piece c may differ from base's
	done  atomic.Bool
	parts [][]byte
	offs  [][]uint32 // NumbersHidden: per piece, start and end of each key's JSON
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
		if p.cls != Full {
			p.offs = make([][]uint32, n)
		}
		for c := range n {
			if old != nil && !p.changed(c) {
				p.parts[c] = old[c]
				if p.offs != nil {
					p.offs[c] = p.base.offs[c]
				}
				continue
			}
			var offs *[]uint32
			if p.offs != nil {
				offs = &p.offs[c]
			}
			p.parts[c] = p.m.appendPiece(keys[c*extPiece:min((c+1)*extPiece, len(keys))], c == 0, c == n-1, p.cls, offs)
		}
		p.base, p.dirty = nil, nil // no chain of old versions
		p.done.Store(true)
	})
	return p.parts
}

func (p *extPieces) changed(c int) bool {
	return c/64 < len(p.dirty) && p.dirty[c/64]&(1<<(c%64)) != 0
}

// appendPiece encodes "201":{...},"202":{...} for keys in class c,
// after "{" if first or else a comma, and before "}" if last; offs, when
// not nil, gets where each key's JSON starts and ends.
func (m ExtensionMap) appendPiece(keys []string, first, last bool, c Class, offs *[]uint32) []byte {
	n := 1
	for _, k := range keys {
		n += len(k) + 4 + len(m.ent(k).json(c))
	}
	b := make([]byte, 0, n)
	if offs != nil {
		*offs = make([]uint32, 0, 2*len(keys))
	}
	for i, k := range keys {
		switch {
		case i > 0 || !first:
			b = append(b, ',')
		default:
			b = append(b, '{')
		}
		b = appendString(b, k)
		b = append(b, ':')
		start := len(b)
		b = append(b, m.ent(k).json(c)...)
		if offs != nil {
			*offs = append(*offs, uint32(start), uint32(len(b)))
		}
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
	// number -> the extensions showing it and how many of their
	// conversations do. A renamed extension re-derives the extensions
	// showing its number from it (markShowing) instead of scanning every
	// busy one.
	shows map[string]showers

	cls [numClasses]pieceTrack // the collection JSON per class
}

// pieceTrack follows one class's collection pieces across Publishes.
type pieceTrack struct {
	pieces *extPieces // cur's collection JSON, as published
	base   *extPieces // the latest assembled pieces, or nil
	dirty  []uint64   // the pieces changed since base
}

func newExtWriter() extWriter {
	w := extWriter{cur: ExtensionMap{root: &extNodes{}}, gen: 1, shows: map[string]showers{}}
	for c := range w.cls {
		w.cls[c].pieces = &extPieces{m: w.cur, cls: Class(c)}
	}
	return w
}

// begin starts a Publish: what is published is shared from now on. When
// a reader assembled the published pieces, they become the base the next
// ones reuse.
func (w *extWriter) begin() {
	w.gen++
	w.changes, w.keysOwn = false, false
	for c := range w.cls {
		t := &w.cls[c]
		if t.pieces.done.Load() && t.pieces != t.base {
			t.base = t.pieces
			clear(t.dirty)
		}
	}
}

// published is the collection JSON of cur in each class: the previous
// one when this Publish changed nothing.
func (w *extWriter) published() [numClasses]*extPieces {
	var out [numClasses]*extPieces
	for c := range w.cls {
		t := &w.cls[c]
		if w.changed() {
			t.pieces = &extPieces{m: w.cur, cls: Class(c), base: t.base, dirty: slices.Clone(t.dirty)}
		}
		out[c] = t.pieces
	}
	return out
}

// changed reports whether set was called in this Publish.
func (w *extWriter) changed() bool { return w.changes }

// showers are the extensions a number is shown by, with how many of
// their conversations show it. Nearly every number is shown by one
// extension (an outside caller, the other party of an internal call), so
// that one is held in place, in the index's own slot: counting and
// uncounting it allocates nothing (a map per number cost a Publish an
// allocation, and a map to walk, per call started or ended).
type showers struct {
	one  string         // the extension, when more is nil
	n    int            // how many of one's conversations show the number
	more map[string]int // when two or more extensions have shown it
}

// index counts (d 1) or uncounts (d -1) the numbers x's conversations
// show.
func (w *extWriter) index(k string, x *Extension, d int) {
	for _, cv := range x.Conversations {
		if n := cv.CounterpartNum; n != "" {
			w.count(n, k, d)
		}
	}
}

// count adds d to how many of extension k's conversations show number n.
func (w *extWriter) count(n, k string, d int) {
	s, ok := w.shows[n]
	switch {
	case !ok:
		if d > 0 {
			w.shows[n] = showers{one: k, n: d}
		}
		return
	case s.more == nil && s.one == k:
		if s.n += d; s.n <= 0 {
			delete(w.shows, n)
			return
		}
	case s.more == nil:
		if d <= 0 {
			return
		}
		s = showers{more: map[string]int{s.one: s.n, k: d}}
	default:
		if s.more[k] += d; s.more[k] <= 0 {
			delete(s.more, k)
			if len(s.more) == 0 {
				delete(w.shows, n)
			}
		}
		return // the map is shared with the slot
	}
	w.shows[n] = s
}

// showCounts is the index as number -> extension -> count (tests).
func (w *extWriter) showCounts() map[string]map[string]int {
	out := make(map[string]map[string]int, len(w.shows))
	for n, s := range w.shows {
		if s.more == nil {
			out[n] = map[string]int{s.one: s.n}
		} else {
			out[n] = maps.Clone(s.more)
		}
	}
	return out
}

// sameShown reports whether a and b's conversations show the same
// numbers, conversation by conversation: then the index counts are those
// already kept (most changes of an extension are of its status or of a
// conversation's state, not of whom it shows).
func sameShown(a, b *Extension) bool {
	if sameMap(a.Conversations, b.Conversations) {
		return true // the view kept the published conversations (extView), or a refresh
	}
	if len(a.Conversations) != len(b.Conversations) {
		return false
	}
	for id, cv := range a.Conversations {
		if bv, ok := b.Conversations[id]; !ok || bv.CounterpartNum != cv.CounterpartNum {
			return false
		}
	}
	return true
}

// sameMap reports whether a and b are the same map (not merely equal).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// showing yields the extensions a conversation of which shows number n.
func (w *extWriter) showing(n string) iter.Seq[string] {
	return func(yield func(string) bool) {
		s, ok := w.shows[n]
		switch {
		case !ok:
		case s.more == nil:
			yield(s.one)
		default:
			for k := range s.more {
				if !yield(k) {
					return
				}
			}
		}
	}
}

// set stores extension k, copying the root, the node and the shard on its
// path first if they are still shared with a published map. old is k's
// entity in cur (nil when k is new): the shard's entry is found by it, a
// scan of a few pointers in the shard itself, not a search comparing
// keys whose bytes are elsewhere in memory.
func (w *extWriter) set(k string, x, old *ent[Extension]) {
	w.changes = true
	if w.cur.root.gen != w.gen {
		r := *w.cur.root
		r.gen = w.gen
		w.cur.root = &r
	}
	i := shardOf(k)
	n := w.cur.root.n[i/extLeafFan]
	if n == nil || n.gen != w.gen {
		c := &extLeaves{gen: w.gen}
		if n != nil {
			c.s = n.s
		}
		n, w.cur.root.n[i/extLeafFan] = c, c
	}
	s := n.s[i%extLeafFan]
	if s == nil || s.gen != w.gen {
		c := &extShard{gen: w.gen}
		if s != nil {
			c.e = make([]extEntry, len(s.e), len(s.e)+1)
			copy(c.e, s.e)
		}
		s, n.s[i%extLeafFan] = c, c
	}
	j, ok := s.at(k, old)
	if !ok {
		w.index(k, &x.v, 1)
	} else if old := &s.e[j].x.v; !sameShown(old, &x.v) {
		w.index(k, old, -1)
		w.index(k, &x.v, 1)
	}
	if !ok {
		if !w.keysOwn { // the published slice is shared: copy it first
			w.cur.keys, w.keysOwn = slices.Clone(w.cur.keys), true
		}
		i, _ := slices.BinarySearch(w.cur.keys, k)
		w.cur.keys = slices.Insert(w.cur.keys, i, k)
		for c := range w.cls {
			w.cls[c].base = nil // the keys after it moved to other pieces
		}
		s.e = slices.Insert(s.e, j, extEntry{k: k})
	} else if slices.ContainsFunc(w.cls[:], func(t pieceTrack) bool { return t.base != nil }) {
		i, _ := slices.BinarySearch(w.cur.keys, k)
		for c := range w.cls {
			w.cls[c].markDirty(i / extPiece)
		}
	}
	s.e[j].x = x
}

// markDirty notes that piece c changed since base.
func (t *pieceTrack) markDirty(c int) {
	if t.base == nil {
		return
	}
	if c/64 >= len(t.dirty) {
		t.dirty = append(t.dirty, make([]uint64, c/64+1-len(t.dirty))...)
	}
	t.dirty[c/64] |= 1 << (c % 64)
}

// ExtensionsFor is the extensions collection for a reader who sees the
// calls of the extensions in full (sorted) and not those of the others:
// the NumbersHidden collection's pieces, cut around each of full's
// extensions to put its Full JSON there, to be written one after the
// other. The hidden pieces are made once per snapshot that changed them,
// so a reader costs no copy of the collection.
func (s *Snapshot) ExtensionsFor(full []string) [][]byte {
	hp := s.extParts[NumbersHidden]
	hid := hp.get()
	if len(full) == 0 {
		return hid
	}
	if !slices.IsSorted(full) {
		full = slices.Sorted(slices.Values(full))
	}
	keys := s.Extensions.keys
	out := make([][]byte, 0, len(hid)+2*len(full))
	add := func(b []byte) {
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	cur, pos := 0, 0 // the piece being written, and how much of it is
	for _, k := range full {
		i, ok := slices.BinarySearch(keys, k)
		if !ok {
			continue
		}
		c := i / extPiece
		for ; cur < c; cur, pos = cur+1, 0 {
			add(hid[cur][pos:])
		}
		o := hp.offs[c][2*(i%extPiece):]
		if cur == c && int(o[0]) < pos {
			continue // listed twice
		}
		add(hid[c][pos:o[0]])
		add(s.Extensions.ent(k).json(Full))
		pos = int(o[1])
	}
	for ; cur < len(hid); cur, pos = cur+1, 0 {
		add(hid[cur][pos:])
	}
	return out
}
