package calls

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Several PBXs in one process: each PBX has its own Engine (and
// link); a Multi merges their snapshots into one combined Snapshot and
// Feed, which rest and ws read as if there were one PBX. The default PBX
// (name "") keeps its ids and its JSON byte for byte; a named PBX's ids
// are qualified "site2:201" and its objects carry "pbx":"site2".
//
// The merge is a diff of each engine's latest snapshot against the one
// merged before: the ExtensionMap shards and the collections an engine
// did not change are the same pointers, and an entity it did not
// re-encode keeps the same bytes, so a merge costs what changed, whatever
// the number of extensions. The entities' updates in the combined feed
// come from that diff (one per changed entity, its latest state); only the
// notifications (extenRinging, userPresenceUpdate, queueMemberUpdate) are
// read from the engine's feed. A duration refresh (no feed change) is
// merged like any other change of bytes, and raises no feed change either.

// PBXSep separates a named PBX from an id of its own: "site2:201". It
// cannot occur in a PBX name (CheckPBXName), Asterisk extension numbers
// and queue or parking names do not use it, and it is safe in a URL path.
const PBXSep = ':'

// DefaultPBXName is how the default PBX is named in the status's "pbxs";
// no named PBX may take it.
const DefaultPBXName = "default"

// QualifyID is id as the combined state names it: "site2:201" for PBX
// site2, id itself for the default PBX ("").
func QualifyID(pbx, id string) string {
	if pbx == "" || id == "" {
		return id
	}
	return pbx + string(PBXSep) + id
}

// SplitID splits a combined id into its PBX and the PBX's own id when the
// part before PBXSep is the name of a PBX (known says which names are);
// otherwise it is the default PBX's id, returned whole.
func SplitID(id string, known func(string) bool) (pbx, local string) {
	if i := strings.IndexByte(id, PBXSep); i > 0 && known(id[:i]) {
		return id[:i], id[i+1:]
	}
	return "", id
}

// CheckPBXName accepts a PBX name: 1-32 of a-z 0-9 - _, starting with a
// letter, not DefaultPBXName.
func CheckPBXName(name string) error {
	if name == "" || len(name) > 32 {
		return errPBXName(name, "1 to 32 characters")
	}
	if name == DefaultPBXName {
		return errPBXName(name, "reserved for the PBX of --ami")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_'):
		default:
			return errPBXName(name, "a lower-case letter, then a-z 0-9 - _")
		}
	}
	return nil
}

type pbxNameError struct{ name, want string }

func (e *pbxNameError) Error() string { return "PBX name " + strconvQuote(e.name) + ": " + e.want }

func errPBXName(name, want string) error { return &pbxNameError{name, want} }

func strconvQuote(s string) string { return string(appendString(nil, s)) }

// Source is one PBX merged by a Multi: *Engine satisfies it.
type Source interface {
	Snapshot() *Snapshot
	Feed() *Feed
}

// Multi is the combined state of several PBXs. Sync may be called from
// any goroutine (one per PBX, each after its engine published); Snapshot
// and Feed are safe from any goroutine.
type Multi struct {
	cells   map[string]string // every PBX's Config.Cellphones, by combined id
	mu      sync.Mutex        // held while merging
	srcs    []*multiSrc
	pub     published
	version uint64
	changes []Change
	feed    *Feed
	snap    atomic.Pointer[Snapshot]
}

type multiSrc struct {
	name string
	src  Source
	last *Snapshot // merged last
	seq  uint64    // the engine feed's seq read last
}

// NewMulti merges the sources, names[i] naming srcs[i] ("" the default
// PBX, at most one). feedSize is the combined feed's (0: DefaultFeedSize).
// The first Snapshot holds what the sources held when it was called.
func NewMulti(feedSize int, names []string, srcs []Source) *Multi {
	m := &Multi{pub: newPublished(), feed: newFeed(feedSize)}
	empty := &Snapshot{queue: newColl[Queue](), park: newColl[Parking](), trunk: newColl[Trunk](), conf: newColl[Conference]()}
	m.cells = map[string]string{}
	for i, s := range srcs {
		for k, v := range s.Snapshot().cellphones { // the engine's configuration: fixed
			m.cells[QualifyID(names[i], k)] = v
		}
	}
	for i, s := range srcs {
		// Notifications from before the Multi are not news.
		ms := &multiSrc{name: names[i], src: s, last: empty, seq: s.Snapshot().Seq}
		m.srcs = append(m.srcs, ms)
	}
	m.snap.Store(m.snapshot(0, 0))
	for i := range m.srcs {
		m.Sync(i)
	}
	return m
}

// Snapshot is the latest combined snapshot.
func (m *Multi) Snapshot() *Snapshot { return m.snap.Load() }

// Feed is the combined feed.
func (m *Multi) Feed() *Feed { return m.feed }

// Sync merges what PBX i (the i-th source) published since the last Sync
// of it, and returns the combined snapshot.
func (m *Multi) Sync(i int) *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.srcs[i]
	cur := src.src.Snapshot()
	prev := m.snap.Load()
	if cur == src.last {
		return prev
	}
	old := src.last
	src.last = cur
	var events []Change
	if cur.Seq > src.seq {
		events, _ = src.src.Feed().Since(src.seq) // gone: only notifications are lost
		// The feed may already hold the next publish's changes, whose
		// snapshot is not stored yet: they are the next Sync's.
		for len(events) > 0 && events[len(events)-1].Seq > cur.Seq {
			events = events[:len(events)-1]
		}
		src.seq = cur.Seq
	}
	p := &m.pub
	p.exts.begin()
	p.queueCopied, p.parkCopied, p.trunkCopied, p.confCopied = false, false, false, false
	ch := m.changes[:0]
	ch = src.events(ch, events, cur, UserPresenceUpdate)
	n := len(ch)
	ch = m.mergeExts(ch, src, old, cur)
	src.hangups(ch[n:], events)
	ch = src.events(ch, events, cur, ExtenRinging)
	ch = m.mergeColls(ch, src, events, old, cur)
	statusChanged := old.Link != cur.Link || old.Since != cur.Since
	if len(ch) == 0 && !statusChanged && !p.exts.changed() && !p.trunkCopied {
		m.changes = ch
		return prev // nothing of this PBX's changed in what is shown
	}
	m.version++
	s := m.snapshot(0, cur.At)
	if statusChanged {
		ch = append(ch, Change{Type: PBXStatus, Key: "pbx", Data: s.status, At: cur.At,
			ent: &multiStatus{full: s.status, version: s.Version, pbxs: s.PBXs, changed: src.name}})
	}
	s.Seq = m.feed.append(ch)
	clear(ch)
	m.changes = ch[:0]
	m.snap.Store(s)
	return s
}

// snapshot is the combined snapshot of what is merged.
func (m *Multi) snapshot(seq uint64, at int64) *Snapshot {
	p := &m.pub
	s := &Snapshot{
		Version: m.version, Seq: seq, At: at,
		Extensions: p.exts.cur, Queues: QueueMap{p.queue}, Parkings: p.parks, Trunks: TrunkMap{p.trunk}, Conferences: p.confs,
		extParts: p.exts.published(), extAll: p.extAll,
		queue: p.queue, park: p.park, trunk: p.trunk, conf: p.conf,
		state: &lazy{}, presence: &lazy{}, cellphones: m.cells,
	}
	for _, src := range m.srcs {
		c := src.last
		s.PBXs = append(s.PBXs, PBXState{Name: src.name, Link: c.Link, Stale: c.Stale || c.Link != LinkLive, Since: c.Since})
	}
	s.Link, s.Stale, s.Since = aggregate(s.PBXs, all)
	s.status = appendMultiStatus(nil, s.Version, s.PBXs, all)
	return s
}

// mergeExts takes the extensions the engine re-encoded between old and
// cur (a new entity: the same pointer is the same bytes).
func (m *Multi) mergeExts(ch []Change, src *multiSrc, old, cur *Snapshot) []Change {
	o, c := old.Extensions.root, cur.Extensions.root
	if o == c || c == nil {
		return ch
	}
	var keys []string
	for i, cn := range c.n {
		var on *extLeaves
		if o != nil {
			on = o.n[i]
		}
		if cn == nil || cn == on {
			continue
		}
		for j, cs := range cn.s {
			var os *extShard
			if on != nil {
				os = on.s[j]
			}
			if cs == nil || cs == os {
				continue
			}
			for _, en := range cs.e {
				if os == nil {
					keys = append(keys, en.k)
				} else if i, ok := os.find(en.k); !ok || os.e[i].x != en.x {
					keys = append(keys, en.k)
				}
			}
		}
	}
	slices.Sort(keys)
	p := &m.pub
	for _, k := range keys {
		qk := QualifyID(src.name, k)
		was := p.exts.cur.ent(qk)
		x := wrap(src, cur.Extensions.ent(k), src.qualifyExt, appendExtension)
		if durationOnly(old, cur, k) {
			p.setExt(qk, was.refreshed(x), was) // no feed change, as in the engine
			continue
		}
		p.setExt(qk, x, was)
		ch = append(ch, Change{Type: ExtenUpdate, Key: qk, Data: x.full, At: cur.At, ent: x.announceKeeping(was)})
	}
	return ch
}

// hangups gives the merged extenUpdates ch the Hangups of the source's
// changes of their extensions (events: what the source published since
// the last Sync; nil when they fell out of its feed).
func (src *multiSrc) hangups(ch, events []Change) {
	var by map[string][]Hangup
	for i := range events {
		if hs := events[i].Hangups(); len(hs) > 0 {
			if by == nil {
				by = map[string][]Hangup{}
			}
			k := QualifyID(src.name, events[i].Key)
			by[k] = append(by[k], hs...)
		}
	}
	for i := range ch {
		if r, ok := ch[i].ent.(*feedRef[Extension]); ok {
			r.hangups = by[ch[i].Key]
		}
	}
}

// wrap is the engine's entity x as the combined state holds it: for the
// default PBX its value and bytes as they are (the NumbersHidden ones
// shared through from), for a named PBX the qualified value encoded anew,
// in full now and, on first need, in NumbersHidden by the engine's
// Opaquer: qualified ids, opaque conversation ids and blank numbers as
// the default PBX's. The Multi owns it (its feed handle is the Multi's).
func wrap[V any](src *multiSrc, x *ent[V], qualify func(V) V, encode encoder[V]) *ent[V] {
	if src.name == "" {
		return &ent[V]{v: x.v, full: x.full, at: x.at, encode: encode, op: x.op, from: x, whole: x.whole}
	}
	return newEnt(qualify(x.v), x.at, x.op, encode, len(x.full)+len(src.name)*8+16)
}

// durationOnly reports whether extension k changed only by a duration
// refresh: same value, new bytes. That is no feed change, as in the engine.
func durationOnly(old, cur *Snapshot, k string) bool {
	a, ok := old.Extensions.Lookup(k)
	if !ok {
		return false
	}
	b := cur.Extensions.Get(k)
	return extEqual(&a, &b)
}

// collMerge is how Sync merges one collection of type V.
type collMerge[V any] struct {
	typ     ChangeType
	of      func(*Snapshot) *coll[V]
	mine    func() *coll[V]           // the Multi's, as being published
	set     func(k string, x *ent[V]) // x nil: removed (conferences)
	qualify func(V) V
	encode  encoder[V]
	refresh func(k string) bool // a duration refresh only; nil: none
	gone    func(k string) V    // the value announcing a removal; nil: none
	// change, when not nil, is the Change announcing x (key qk), the
	// value it replaces was (nil: none) and h its handle (trunks: what
	// changed, trunkdelta.go).
	change func(qk string, was, x *ent[V], h classed, at int64) Change
	// wrap, when not nil, is the Multi's entity of the engine's y (key k),
	// the Multi's was (nil: none) before it (trunks: qualified from was by
	// what changed); nil: wrap.
	wrap func(k string, y, was *ent[V]) *ent[V]
}

// mergeColl takes the entities of a collection the engine re-encoded
// between old and cur, and those it removed when cm.gone says how to
// announce it.
func mergeColl[V any](ch []Change, src *multiSrc, old, cur *Snapshot, cm collMerge[V]) []Change {
	o, c := cm.of(old), cm.of(cur)
	if o == c || c == nil {
		return ch
	}
	var keys []string
	for k, x := range c.ents {
		if o.ents[k] != x {
			keys = append(keys, k)
		}
	}
	if cm.gone != nil {
		for k := range o.ents {
			if _, ok := c.ents[k]; !ok {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		qk := QualifyID(src.name, k)
		was := cm.mine().ents[qk]
		var x *ent[V]
		if y := c.ents[k]; y != nil {
			if cm.wrap != nil {
				x = cm.wrap(k, y, was)
			} else {
				x = wrap(src, y, cm.qualify, cm.encode)
			}
			if cm.refresh != nil && cm.refresh(k) {
				cm.set(qk, was.refreshed(x)) // no feed change, as in the engine
				continue
			}
			cm.set(qk, x)
		} else {
			x = newEnt(cm.qualify(cm.gone(k)), cur.At, o.ents[k].op, cm.encode, 32)
			cm.set(qk, nil)
		}
		var cl classed = x // a conferenceUpdate carries its room (Change.Conference)
		if cm.gone == nil {
			cl = x.announce(was)
		}
		if cm.change != nil {
			ch = append(ch, cm.change(qk, was, x, cl, cur.At))
			continue
		}
		ch = append(ch, Change{Type: cm.typ, Key: qk, Data: x.full, At: cur.At, ent: cl})
	}
	return ch
}

// mergeColls merges the queues (then the engine's queueMemberUpdate
// notifications), parkings, trunks and conferences.
func (m *Multi) mergeColls(ch []Change, src *multiSrc, events []Change, old, cur *Snapshot) []Change {
	p := &m.pub
	ch = mergeColl(ch, src, old, cur, collMerge[Queue]{typ: QueueMembers,
		of: func(s *Snapshot) *coll[Queue] { return s.queue }, mine: func() *coll[Queue] { return p.queue },
		set: p.setQueue, qualify: src.qualifyQueue, encode: appendQueue,
		change: func(qk string, was, x *ent[Queue], h classed, at int64) Change {
			var before map[string]*QueueMember
			if was != nil {
				before = was.v.Members
			}
			d := newQueueDelta(before, &x.v, nil, true, x.op, h)
			return Change{Type: QueueMembers, Key: qk, Data: d.full, At: at, ent: d}
		}})
	ch = src.events(ch, events, cur, QueueMemberUpdate)
	ch = mergeColl(ch, src, old, cur, collMerge[Parking]{typ: ParkingUpdate,
		of: func(s *Snapshot) *coll[Parking] { return s.park }, mine: func() *coll[Parking] { return p.park },
		set: p.setPark, qualify: src.qualifyParking, encode: appendParking})
	ch = mergeColl(ch, src, old, cur, collMerge[Trunk]{typ: TrunkConversations,
		of: func(s *Snapshot) *coll[Trunk] { return s.trunk }, mine: func() *coll[Trunk] { return p.trunk },
		set: p.setTrunk, qualify: src.qualifyTrunk, encode: appendTrunk,
		refresh: func(k string) bool {
			was, ok := old.Trunks.Lookup(k)
			now := cur.Trunks.Get(k)
			return ok && trunkEqual(&was, &now)
		},
		wrap: func(k string, y, was *ent[Trunk]) *ent[Trunk] {
			before, ok := old.Trunks.Lookup(k)
			if src.name == "" || was == nil || !ok {
				return wrap(src, y, src.qualifyTrunk, appendTrunk)
			}
			return newLazyEnt(src.qualifyTrunkFrom(&before, &was.v, y.v), y.at, y.op, appendTrunk)
		},
		change: func(qk string, was, x *ent[Trunk], h classed, at int64) Change {
			var before ConvMap
			if was != nil {
				before = was.v.Conversations
			}
			d := newTrunkDelta(before, &x.v, at, x.op, h)
			return Change{Type: TrunkConversations, Key: qk, Data: d.full, At: at, ent: d}
		}})
	return mergeColl(ch, src, old, cur, collMerge[Conference]{typ: ConferenceUpdate,
		of: func(s *Snapshot) *coll[Conference] { return s.conf }, mine: func() *coll[Conference] { return p.conf },
		set:     p.setConf,
		qualify: func(v Conference) Conference { return src.qualifyConf(v, cur) },
		encode:  appendConference,
		gone:    func(k string) Conference { return Conference{ID: k} }})
}

// Collection names a collection for Snapshot.CollectionWhere.
type Collection uint8

const (
	CollExtensions Collection = iota
	CollQueues
	CollParkings
	CollTrunks
)

// CollectionWhere is collection c's JSON, {"key":{...},...} in key order,
// of the entities keep keeps, each in the class class gives for its key:
// a part of the combined state (a ?pbx= read, a reader limited to some
// PBXs) as a filtered reader sees the whole. The entities' bytes are
// picked, never rewritten; the result is made per call, for the caller to
// keep.
func (s *Snapshot) CollectionWhere(c Collection, keep func(key string) bool, class func(key string) Class) []byte {
	switch c {
	case CollExtensions:
		return appendWhere(s.Extensions.keys, s.Extensions.ent, keep, class)
	case CollQueues:
		return collWhere(s.queue, keep, class)
	case CollParkings:
		return collWhere(s.park, keep, class)
	case CollTrunks:
		return collWhere(s.trunk, keep, class)
	}
	return []byte("{}")
}

func collWhere[V any](c *coll[V], keep func(string) bool, class func(string) Class) []byte {
	return appendWhere(sortedKeys(c.ents), func(k string) *ent[V] { return c.ents[k] }, keep, class)
}

func appendWhere[V any](keys []string, get func(string) *ent[V], keep func(string) bool, class func(string) Class) []byte {
	b := append(make([]byte, 0, 4096), '{')
	n := 0
	for _, k := range keys {
		if !keep(k) {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, get(k).json(class(k))...)
	}
	return append(b, '}')
}
