package calls

import (
	"iter"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// A call centre's trunk holds a thousand conversations at once. A map of
// them copied on each change, and the trunk's JSON written whole, made a
// Publish cost what the trunk held (docs/loadtest.md "The call centre's
// mix"). So a trunk's conversations are a ConvMap: sorted chunks of
// conversations, each with its JSON, shared by every snapshot until a
// conversation in it changes. A Publish that changes one conversation
// copies one chunk (at most convChunkMax pointers) and the list of chunks;
// the trunk's JSON is put together from the conversations' pieces when a
// reader asks for it (REST, a snapshot), once per snapshot.

const (
	convChunkMax  = 64 // a chunk that grows past this is cut in two
	convChunkHalf = convChunkMax / 2
)

// ConvMap is a trunk's conversations by id, sorted. It is immutable: a
// Publish that changes some makes a new one sharing the chunks it did not
// change. The zero value is empty.
type ConvMap struct {
	ch []*convChunk
	n  int
}

// A convChunk is some consecutive conversations of a ConvMap, by id. gen
// is the Publish that made it: that Publish may still change it in place.
type convChunk struct {
	gen   uint64
	items []*convItem
}

// A convItem is one conversation and its JSON, `"id":{...}` as
// appendConvEntry writes it, in two parts around the duration: the
// duration is written when the pieces are put together (at the time of
// the whole, or of the delta), so a call's piece is made once, not once a
// second. Immutable once published (the NumbersHidden piece is made on
// first need, once).
type convItem struct {
	cv   Conversation
	full convPiece
	once sync.Once
	hid  convPiece
}

// convPiece is a conversation's JSON with its duration left out at d.
type convPiece struct {
	b []byte
	d int
}

func newConvItem(cv Conversation) *convItem {
	it := &convItem{cv: cv}
	it.full = encodeConvPiece(&it.cv, enc{})
	return it
}

func encodeConvPiece(cv *Conversation, e enc) convPiece {
	b := e.convID(make([]byte, 0, 512), cv.ID)
	b = appendConvHead(append(b, ':'), cv, e)
	d := len(b)
	b = appendConvTail(b, cv, e)
	return convPiece{b: slices.Clip(b), d: d}
}

// piece is the item's JSON in class c, the NumbersHidden one made by op
// (the engine's Opaquer: every caller passes the same).
func (it *convItem) piece(c Class, op Opaquer) convPiece {
	if c == Full {
		return it.full
	}
	it.once.Do(func() { it.hid = encodeConvPiece(&it.cv, enc{hide: true, op: op}) })
	return it.hid
}

// appendAt appends the item's JSON in class c with its duration at at.
func (it *convItem) appendAt(b []byte, c Class, op Opaquer, at int64) []byte {
	p := it.piece(c, op)
	b = append(b, p.b[:p.d]...)
	b = strconv.AppendInt(b, it.cv.Duration(at), 10)
	return append(b, p.b[p.d:]...)
}

// Len is how many conversations there are.
func (m ConvMap) Len() int { return m.n }

// items yields the conversations' items in id order.
func (m ConvMap) items(yield func(*convItem) bool) {
	for _, c := range m.ch {
		for _, it := range c.items {
			if !yield(it) {
				return
			}
		}
	}
}

// All yields every conversation by id, in id order.
func (m ConvMap) All() iter.Seq2[string, Conversation] {
	return func(yield func(string, Conversation) bool) {
		for it := range m.items {
			if !yield(it.cv.ID, it.cv) {
				return
			}
		}
	}
}

// Lookup is conversation id, and whether there is one.
func (m ConvMap) Lookup(id string) (Conversation, bool) {
	if it := m.item(id); it != nil {
		return it.cv, true
	}
	return Conversation{}, false
}

// Map is the conversations in a map of the caller's.
func (m ConvMap) Map() map[string]Conversation {
	out := make(map[string]Conversation, m.n)
	for id, cv := range m.All() {
		out[id] = cv
	}
	return out
}

// ConvMapOf is the ConvMap of the conversations of m (keyed by their id).
func ConvMapOf(m map[string]Conversation) ConvMap {
	var w convWriter
	w.begin(ConvMap{})
	for _, id := range sortedKeys(m) {
		w.set(newConvItem(m[id]))
	}
	return w.m
}

// chunkOf is the index of the chunk that holds id or would: the last
// whose first id is not after it (0 when id is before them all).
func (m ConvMap) chunkOf(id string) int {
	i, _ := slices.BinarySearchFunc(m.ch, id, func(c *convChunk, id string) int { return cmpString(c.items[0].cv.ID, id) })
	if i < len(m.ch) && m.ch[i].items[0].cv.ID == id {
		return i
	}
	return max(i-1, 0)
}

func (c *convChunk) find(id string) (int, bool) {
	return slices.BinarySearchFunc(c.items, id, func(it *convItem, id string) int { return cmpString(it.cv.ID, id) })
}

// item is conversation id's item, or nil.
func (m ConvMap) item(id string) *convItem {
	if len(m.ch) == 0 {
		return nil
	}
	c := m.ch[m.chunkOf(id)]
	if j, ok := c.find(id); ok {
		return c.items[j]
	}
	return nil
}

// equal reports whether a and b hold the same conversations.
func (a ConvMap) equal(b ConvMap) bool {
	if a.n != b.n {
		return false
	}
	next, stop := iter.Pull(b.items)
	defer stop()
	for x := range a.items {
		y, _ := next()
		if x != y && !convEqual(x.cv, y.cv) {
			return false
		}
	}
	return true
}

func (m ConvMap) anyAnswered() bool {
	for it := range m.items {
		if it.cv.AnsweredAt != 0 {
			return true
		}
	}
	return false
}

// appendJSON writes the conversations object, {"id":{...},...}, in class
// c with the durations at at: the bytes appendConversations writes.
func (m ConvMap) appendJSON(b []byte, c Class, op Opaquer, at int64) []byte {
	b = append(b, '{')
	i := 0
	for it := range m.items {
		if i > 0 {
			b = append(b, ',')
		}
		i++
		b = it.appendAt(b, c, op, at)
	}
	return append(b, '}')
}

// jsonSize is about how long appendJSON's bytes are in class c.
func (m ConvMap) jsonSize(c Class, op Opaquer) int {
	n := 2
	for it := range m.items {
		n += len(it.piece(c, op).b) + 12
	}
	return n
}

// diff calls set for each item of cur that is not old's (new or
// changed) and gone for each id of old that cur does not hold, in id
// order; chunks the two share are skipped whole.
func (old ConvMap) diff(cur ConvMap, set func(*convItem), gone func(id string)) {
	var a, b []*convItem // the rest of the chunks being compared
	i, j := 0, 0         // the next chunks
	for {
		if len(a) == 0 && len(b) == 0 {
			for i < len(old.ch) && j < len(cur.ch) && old.ch[i] == cur.ch[j] {
				i, j = i+1, j+1
			}
		}
		if len(a) == 0 && i < len(old.ch) {
			a, i = old.ch[i].items, i+1
		}
		if len(b) == 0 && j < len(cur.ch) {
			b, j = cur.ch[j].items, j+1
		}
		switch {
		case len(a) == 0 && len(b) == 0:
			return
		case len(a) > 0 && len(b) > 0 && a[0] == b[0]: // kept in a copied chunk: no need to read it
			a, b = a[1:], b[1:]
		case len(b) == 0 || len(a) > 0 && a[0].cv.ID < b[0].cv.ID:
			gone(a[0].cv.ID)
			a = a[1:]
		case len(a) == 0 || b[0].cv.ID < a[0].cv.ID:
			set(b[0])
			b = b[1:]
		default:
			if a[0] != b[0] {
				set(b[0])
			}
			a, b = a[1:], b[1:]
		}
	}
}

// convWriter is the copy-on-write of a ConvMap during one Publish: the
// chunks of generation gen and, once copied, the list of chunks are its
// own to change in place.
type convWriter struct {
	m       ConvMap
	gen     uint64
	rootOwn bool
	changed bool // set or del changed m since begin
}

// convGen numbers the convWriters' Publishes, all writers together: a
// chunk is only ever written by the Publish that made it.
var convGen atomic.Uint64

// begin starts a Publish on m: what m holds is shared from now on.
func (w *convWriter) begin(m ConvMap) {
	w.m, w.gen, w.rootOwn, w.changed = m, convGen.Add(1), false, false
}

func (w *convWriter) own() {
	if !w.rootOwn {
		w.m.ch, w.rootOwn = slices.Clone(w.m.ch), true
	}
}

// chunk is chunk i, copied first if it is shared.
func (w *convWriter) chunk(i int) *convChunk {
	c := w.m.ch[i]
	if c.gen != w.gen {
		w.own()
		c = &convChunk{gen: w.gen, items: append(make([]*convItem, 0, len(c.items)+1), c.items...)}
		w.m.ch[i] = c
	}
	return c
}

// set stores it under its conversation's id.
func (w *convWriter) set(it *convItem) {
	id := it.cv.ID
	w.changed = true
	if len(w.m.ch) == 0 {
		w.own()
		w.m.ch = append(w.m.ch, &convChunk{gen: w.gen, items: []*convItem{it}})
		w.m.n++
		return
	}
	i := w.m.chunkOf(id)
	c := w.chunk(i)
	j, ok := c.find(id)
	if ok {
		c.items[j] = it
		return
	}
	c.items = slices.Insert(c.items, j, it)
	w.m.n++
	if len(c.items) > convChunkMax {
		w.own()
		rest := &convChunk{gen: w.gen, items: slices.Clone(c.items[convChunkHalf:])}
		clear(c.items[convChunkHalf:])
		c.items = c.items[:convChunkHalf]
		w.m.ch = slices.Insert(w.m.ch, i+1, rest)
	}
}

// del removes conversation id, if there is one.
func (w *convWriter) del(id string) {
	if len(w.m.ch) == 0 {
		return
	}
	i := w.m.chunkOf(id)
	j, ok := w.m.ch[i].find(id)
	if !ok {
		return
	}
	w.changed = true
	c := w.chunk(i) // a copy holds id at j too
	c.items = slices.Delete(c.items, j, j+1)
	w.m.n--
	if len(c.items) == 0 {
		w.own()
		w.m.ch = slices.Delete(w.m.ch, i, i+1)
	}
}
