package calls

import (
	"iter"
	"maps"
	"slices"
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
	size int      // bytes of the extensions' JSON, to size ExtensionsJSON
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

// appendJSON appends {"201":{...},...} in key order.
func (m ExtensionMap) appendJSON(b []byte) []byte {
	b = slices.Grow(b, m.size+len(m.keys)*12+2)
	b = append(b, '{')
	for i, k := range m.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, m.json(k)...)
	}
	return append(b, '}')
}

// extWriter is the engine's copy-on-write of the published ExtensionMap
// during one Publish: what it copied in this Publish it may write in place.
type extWriter struct {
	cur     ExtensionMap
	copied  map[any]bool // the root, nodes and shards copied in this Publish
	keysOwn bool         // cur.keys was copied in this Publish
}

func newExtWriter() extWriter {
	return extWriter{cur: ExtensionMap{root: &extNodes{}}, copied: map[any]bool{}}
}

// begin starts a Publish: what is published is shared from now on.
func (w *extWriter) begin() {
	clear(w.copied)
	w.keysOwn = false
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
	}
	w.cur.size += len(b) - len(s.json[k])
	s.vals[k], s.json[k] = v, b
}
