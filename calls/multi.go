package calls

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Several PBXs in one process (issue 16): each PBX has its own Engine (and
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

// PBXState is one PBX's link as the combined snapshot shows it.
type PBXState struct {
	Name  string // "" for the default PBX
	Link  LinkState
	Stale bool
	Since int64 // ms since the epoch when Link last changed
}

// Source is one PBX merged by a Multi: *Engine satisfies it.
type Source interface {
	Snapshot() *Snapshot
	Feed() *Feed
}

// Multi is the combined state of several PBXs. Sync may be called from
// any goroutine (one per PBX, each after its engine published); Snapshot
// and Feed are safe from any goroutine.
type Multi struct {
	mu      sync.Mutex // held while merging
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
	empty := &Snapshot{queue: &coll{}, park: &coll{}, trunk: &coll{}, conf: &coll{}}
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
	ch = src.events(ch, events, cur, "userPresenceUpdate")
	ch = m.mergeExts(ch, src, old, cur)
	ch = src.events(ch, events, cur, "extenRinging")
	ch = m.mergeColl(ch, src, old, cur, "queueUpdate")
	ch = src.events(ch, events, cur, "queueMemberUpdate")
	ch = m.mergeColl(ch, src, old, cur, "parkingUpdate")
	ch = m.mergeColl(ch, src, old, cur, "trunkUpdate")
	ch = m.mergeColl(ch, src, old, cur, "conferenceUpdate")
	statusChanged := old.Link != cur.Link || old.Since != cur.Since
	if len(ch) == 0 && !statusChanged && !p.exts.changed() && !p.trunkCopied {
		m.changes = ch
		return prev // nothing of this PBX's changed in what is shown
	}
	m.version++
	s := m.snapshot(0, cur.At)
	if statusChanged {
		ch = append(ch, Change{Type: "pbxStatus", Key: "pbx", Data: s.status, At: cur.At})
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
		Version: m.version, Seq: seq, At: at, Link: LinkLive,
		Extensions: p.exts.cur, Queues: p.queues, Parkings: p.parks, Trunks: p.trunks, Conferences: p.confs,
		extParts: p.exts.published(), extAll: p.extAll,
		queue: p.queue, park: p.park, trunk: p.trunk, conf: p.conf,
		state: &lazy{}, presence: &lazy{},
	}
	for _, src := range m.srcs {
		c := src.last
		st := PBXState{Name: src.name, Link: c.Link, Stale: c.Stale || c.Link != LinkLive, Since: c.Since}
		s.PBXs = append(s.PBXs, st)
		if src.name == "" {
			s.cellphones = c.cellphones // the default PBX's presence as it is
		}
		if worse(st.Link, s.Link) {
			s.Link = st.Link
		}
		s.Stale = s.Stale || st.Stale
		s.Since = max(s.Since, st.Since)
	}
	s.status = appendMultiStatus(nil, s)
	return s
}

// worse orders the link states for the aggregate: down, stalled,
// resyncing, live.
func worse(a, b LinkState) bool {
	rank := func(l LinkState) int {
		switch l {
		case LinkDown:
			return 0
		case LinkStalled:
			return 1
		case LinkResyncing:
			return 2
		}
		return 3
	}
	return rank(a) < rank(b)
}

// appendMultiStatus is the status with every PBX's link:
// {"pbx":"<worst>","version":N,"since":ms,"pbxs":{"default":{"pbx":"live","stale":false,"since":ms},"site2":{...}}}.
func appendMultiStatus(b []byte, s *Snapshot) []byte {
	b = appendStatus(b, s.Link, s.Version, s.Since)
	b = append(b[:len(b)-1], `,"pbxs":{`...)
	for i, st := range s.PBXs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cmp.Or(st.Name, DefaultPBXName))
		b = append(b, `:{`...)
		b = appendStrField(b, "pbx", st.Link.String())
		b = append(b, ',')
		b = appendBoolField(b, "stale", st.Stale)
		b = append(b, ',')
		b = appendIntField(b, "since", st.Since)
		b = append(b, '}')
	}
	return append(b, '}', '}')
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// mergeExts takes the extensions whose bytes changed between old and cur.
func (m *Multi) mergeExts(ch []Change, src *multiSrc, old, cur *Snapshot) []Change {
	o, c := old.Extensions.root, cur.Extensions.root
	if o == c || c == nil {
		return ch
	}
	var keys []string
	for i, cn := range c {
		var on *extLeaves
		if o != nil {
			on = o[i]
		}
		if cn == nil || cn == on {
			continue
		}
		for j, cs := range cn {
			var os *extShard
			if on != nil {
				os = on[j]
			}
			if cs == nil || cs == os {
				continue
			}
			for k, b := range cs.json {
				if os == nil || !sameBytes(os.json[k], b) {
					keys = append(keys, k)
				}
			}
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, b := cur.Extensions.Get(k), cur.Extensions.json(k)
		qk := QualifyID(src.name, k)
		if src.name != "" {
			v = src.qualifyExt(v)
			b = appendExtension(make([]byte, 0, len(b)+len(src.name)*8+16), &v, cur.At)
		}
		m.pub.setExt(qk, v, b)
		if !durationOnly(old, cur, k) {
			ch = append(ch, Change{Type: "extenUpdate", Key: qk, Data: b, At: cur.At})
		}
	}
	return ch
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

// mergeColl takes the queues, parkings, trunks or conferences whose bytes
// changed between old and cur (conferences may be removed).
func (m *Multi) mergeColl(ch []Change, src *multiSrc, old, cur *Snapshot, typ string) []Change {
	o, c := collOf(old, typ), collOf(cur, typ)
	if o == c || c == nil {
		return ch
	}
	var keys []string
	for k, b := range c.json {
		if !sameBytes(o.json[k], b) {
			keys = append(keys, k)
		}
	}
	for k := range o.json {
		if _, ok := c.json[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	p := &m.pub
	for _, k := range keys {
		qk := QualifyID(src.name, k)
		b, gone := c.json[k], false
		switch typ {
		case "queueUpdate":
			v := src.qualifyQueue(cur.Queues[k])
			b = src.encode(b, func(b []byte) []byte { return appendQueue(b, &v) })
			p.setQueue(qk, v, b)
		case "parkingUpdate":
			v := src.qualifyParking(cur.Parkings[k])
			b = src.encode(b, func(b []byte) []byte { return appendParking(b, &v) })
			p.setPark(qk, v, b)
		case "trunkUpdate":
			v := src.qualifyTrunk(cur.Trunks[k])
			b = src.encode(b, func(b []byte) []byte { return appendTrunk(b, &v, cur.At) })
			p.setTrunk(qk, v, b)
			if was, ok := old.Trunks[k]; ok && trunkEqual(&was, ptr(cur.Trunks[k])) {
				continue // a duration refresh: no feed change, as in the engine
			}
		case "conferenceUpdate":
			v, ok := cur.Conferences[k]
			if gone = !ok; gone {
				v = Conference{ID: k}
			}
			v = src.qualifyConf(v, cur)
			b = src.encode(b, func(b []byte) []byte { return appendConference(b, &v) })
			if gone {
				p.setConf(qk, nil, nil)
			} else {
				p.setConf(qk, &v, b)
			}
		}
		ch = append(ch, Change{Type: typ, Key: qk, Data: b, At: cur.At})
	}
	return ch
}

func ptr[T any](v T) *T { return &v }

func collOf(s *Snapshot, typ string) *coll {
	switch typ {
	case "queueUpdate":
		return s.queue
	case "parkingUpdate":
		return s.park
	case "trunkUpdate":
		return s.trunk
	}
	return s.conf
}

// encode is b for the default PBX, the qualified value's encoding for a
// named one.
func (src *multiSrc) encode(b []byte, enc func([]byte) []byte) []byte {
	if src.name == "" && b != nil {
		return b
	}
	return enc(make([]byte, 0, len(b)+64))
}
