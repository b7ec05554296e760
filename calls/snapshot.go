package calls

import (
	"iter"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// Snapshot is an immutable published state. Any goroutine may read it and
// keep it; nothing in it is ever written after Publish returns it (byte
// slices returned by its methods must not be modified by the caller).
type Snapshot struct {
	Version uint64    // increments on each Publish that changed something, and on each RefreshDurations that re-encoded
	Seq     uint64    // last Feed seq included
	Link    LinkState // link state when published
	Stale   bool      // Link is not live: the PBX state may be out of date
	Since   int64     // ms since the epoch when Link last changed
	At      int64     // ms since the epoch of the Publish
	// Unheard: the node serving it says on its own that it cannot hear
	// the state's source (Snapshot.Unheard): Link stalled, Stale, at the
	// same Seq and Version, no change of it in the feed.
	Unheard bool

	Extensions ExtensionMap       // by number
	Queues     QueueMap           // by queue name
	Parkings   map[string]Parking // by space
	Trunks     TrunkMap           // by trunk name
	// Conferences are the ConfBridge rooms in use, by room.
	Conferences map[string]Conference
	// PBXs is each PBX's link when several are followed (Multi), in the
	// order they were configured; nil with one PBX.
	PBXs []PBXState

	extParts   [numClasses]*extPieces // ExtensionsParts, ExtensionsFor
	extAll     *lazy                  // ExtensionsJSON
	queue      *coll[Queue]
	park       *coll[Parking]
	trunk      *coll[Trunk]
	conf       *coll[Conference]
	status     []byte
	state      *lazy
	cellphones map[string]string // Config.Cellphones, for PresenceJSON
	presence   *lazy
}

// coll is the encoded side of one collection: its entities and the
// lazily assembled collection JSON per class, shared by the snapshots
// that did not change it.
type coll[V any] struct {
	ents map[string]*ent[V]
	all  [numClasses]lazy
}

type lazy struct {
	once sync.Once
	b    []byte
}

func newColl[V any]() *coll[V] { return &coll[V]{ents: map[string]*ent[V]{}} }

// clone is a copy to change in place, its collection JSON not yet made.
func (c *coll[V]) clone() *coll[V] { return &coll[V]{ents: maps.Clone(c.ents)} }

func (c *coll[V]) bytes(cl Class) []byte {
	a := &c.all[cl]
	a.once.Do(func() { a.b = appendCollection(nil, c.ents, cl) })
	return a.b
}

// CollMap is a Snapshot's queues or trunks by name. It is immutable: it
// reads the snapshot's entities, so a Publish that changes one copies the
// map of their pointers (a few bytes each), not every value as well. The
// zero value is empty.
type CollMap[V any] struct{ c *coll[V] }

// QueueMap is a Snapshot's queues by name.
type QueueMap = CollMap[Queue]

// TrunkMap is a Snapshot's trunks by name.
type TrunkMap = CollMap[Trunk]

func (m CollMap[V]) ent(name string) *ent[V] {
	if m.c == nil {
		return nil
	}
	return m.c.ents[name]
}

// Lookup is the value named name, and whether it exists.
func (m CollMap[V]) Lookup(name string) (V, bool) {
	if x := m.ent(name); x != nil {
		return x.v, true
	}
	var zero V
	return zero, false
}

// Get is the value named name, or the zero value.
func (m CollMap[V]) Get(name string) V {
	v, _ := m.Lookup(name)
	return v
}

// Len is how many there are.
func (m CollMap[V]) Len() int {
	if m.c == nil {
		return 0
	}
	return len(m.c.ents)
}

// All yields every name and value, in no particular order.
func (m CollMap[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m.c == nil {
			return
		}
		for k, x := range m.c.ents {
			if !yield(k, x.v) {
				return
			}
		}
	}
}

// Keys is every name, sorted, in a slice of the caller's.
func (m CollMap[V]) Keys() []string {
	if m.c == nil {
		return []string{}
	}
	return sortedKeys(m.c.ents)
}

// ExtensionJSON is one extension's JSON, or nil when it does not exist.
func (s *Snapshot) ExtensionJSON(exten string) []byte { return s.ExtensionJSONAs(exten, Full) }

// ExtensionJSONAs is one extension's JSON in class c, or nil.
func (s *Snapshot) ExtensionJSONAs(exten string, c Class) []byte {
	return s.Extensions.ent(exten).json(c)
}

// ConversationsJSON is extension exten's conversations object,
// {"<id>":{Conversation},...} in full, or nil when it does not exist.
func (s *Snapshot) ConversationsJSON(exten string) []byte {
	x := s.Extensions.ent(exten)
	if x == nil {
		return nil
	}
	return appendConversations(nil, x.v.Conversations, x.at, enc{})
}

// QueueJSON is one queue's JSON, or nil.
func (s *Snapshot) QueueJSON(name string) []byte { return s.QueueJSONAs(name, Full) }

// QueueJSONAs is one queue's JSON in class c, or nil.
func (s *Snapshot) QueueJSONAs(name string, c Class) []byte { return s.queue.ents[name].json(c) }

// ParkingJSON is one parking space's JSON, or nil.
func (s *Snapshot) ParkingJSON(space string) []byte { return s.ParkingJSONAs(space, Full) }

// ParkingJSONAs is one parking space's JSON in class c, or nil.
func (s *Snapshot) ParkingJSONAs(space string, c Class) []byte { return s.park.ents[space].json(c) }

// TrunkJSON is one trunk's JSON, or nil.
func (s *Snapshot) TrunkJSON(name string) []byte { return s.TrunkJSONAs(name, Full) }

// TrunkJSONAs is one trunk's JSON in class c, or nil.
func (s *Snapshot) TrunkJSONAs(name string, c Class) []byte { return s.trunk.ents[name].json(c) }

// QueueName resolves a queue's identity: its app_queue name, or the number
// callers dial to reach it. ok is false when neither names a queue.
func (s *Snapshot) QueueName(id string) (name string, ok bool) {
	if _, ok := s.Queues.Lookup(id); ok {
		return id, true
	}
	if id == "" {
		return "", false
	}
	for k, q := range s.Queues.All() {
		if q.Number == id {
			return k, true
		}
	}
	return "", false
}

// ExtensionsJSON is {"201":{...},...} in key order.
func (s *Snapshot) ExtensionsJSON() []byte {
	s.extAll.once.Do(func() { s.extAll.b = joinPieces(s.ExtensionsParts()) })
	return s.extAll.b
}

// ExtensionsParts is ExtensionsJSON in pieces, to be written one after
// the other: a change re-encodes the piece holding the extension, and the
// other pieces are the same slices as in the snapshots before it, so a
// reader may remember what it made of a piece by its first byte's address
// and length.
func (s *Snapshot) ExtensionsParts() [][]byte { return s.extParts[Full].get() }

// QueuesJSON is {"support":{...},...} in key order.
func (s *Snapshot) QueuesJSON() []byte { return s.queue.bytes(Full) }

// ParkingsJSON is {"701":{...},...} in key order.
func (s *Snapshot) ParkingsJSON() []byte { return s.park.bytes(Full) }

// TrunksJSON is {"trunk":{...},...} in key order.
func (s *Snapshot) TrunksJSON() []byte { return s.trunk.bytes(Full) }

// QueuesJSONAs, ParkingsJSONAs and TrunksJSONAs are those collections
// in class c, assembled once per snapshot that changed them.
func (s *Snapshot) QueuesJSONAs(c Class) []byte { return s.queue.bytes(c) }

// ParkingsJSONAs: see QueuesJSONAs.
func (s *Snapshot) ParkingsJSONAs(c Class) []byte { return s.park.bytes(c) }

// TrunksJSONAs: see QueuesJSONAs.
func (s *Snapshot) TrunksJSONAs(c Class) []byte { return s.trunk.bytes(c) }

// StatusJSON is {"pbx":"live|resyncing|stalled|down","version":N,"since":ms}.
func (s *Snapshot) StatusJSON() []byte { return s.status }

// PresenceJSON is every extension's chosen presence (PresenceOf, with the
// cellphone of the user whose main extension it is), {"201":"online",...}
// in key order: the state userPresenceUpdate events change.
func (s *Snapshot) PresenceJSON() []byte {
	s.presence.once.Do(func() { s.presence.b = s.PresenceJSONWhere(all) })
	return s.presence.b
}

// PresenceJSONWhere is PresenceJSON of the extensions keep says yes to
// (by key: a reader of some PBXs keeps theirs). Made per call, for the
// caller to keep.
func (s *Snapshot) PresenceJSONWhere(keep func(exten string) bool) []byte {
	b := []byte{'{'}
	for _, k := range s.Extensions.Keys() {
		if !keep(k) {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		x := s.Extensions.Get(k)
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, PresenceOf(&x, s.cellphones[k]))
	}
	return append(b, '}')
}

// StateJSON is the whole state, as `ctibridge replay` prints it:
// {"pbx":{status},"extensions":{..},"queues":{..},"parkings":{..},"trunks":{..},"conferences":{..}}.
func (s *Snapshot) StateJSON() []byte {
	s.state.once.Do(func() {
		b := make([]byte, 0, 80+len(s.status)+len(s.ExtensionsJSON())+len(s.QueuesJSON())+len(s.ParkingsJSON())+len(s.TrunksJSON())+len(s.ConferencesJSON()))
		b = append(b, `{"pbx":`...)
		b = append(b, s.status...)
		b = append(b, `,"extensions":`...)
		b = append(b, s.ExtensionsJSON()...)
		b = append(b, `,"queues":`...)
		b = append(b, s.QueuesJSON()...)
		b = append(b, `,"parkings":`...)
		b = append(b, s.ParkingsJSON()...)
		b = append(b, `,"trunks":`...)
		b = append(b, s.TrunksJSON()...)
		b = append(b, `,"conferences":`...)
		b = append(b, s.ConferencesJSON()...)
		s.state.b = append(b, '}')
	})
	return s.state.b
}

// published is the engine's copy of what the last snapshot holds, updated
// copy-on-write at Publish.
type published struct {
	exts   extWriter
	extAll *lazy // ExtensionsJSON of exts, shared until an extension changes
	parks  map[string]Parking
	confs  map[string]Conference
	queue  *coll[Queue]
	park   *coll[Parking]
	trunk  *coll[Trunk]
	conf   *coll[Conference]
	// copied marks the maps already cloned during the running Publish.
	queueCopied, parkCopied, trunkCopied, confCopied bool
	// The dirty keys of the collection being published, sorted: kept
	// across Publishes, emptied after use.
	keys    []string
	members []memberKey
}

func newPublished() published {
	return published{
		exts:   newExtWriter(),
		extAll: &lazy{},
		parks:  map[string]Parking{},
		confs:  map[string]Conference{},
		queue:  newColl[Queue](),
		park:   newColl[Parking](),
		trunk:  newColl[Trunk](),
		conf:   newColl[Conference](),
	}
}

// snapshotAlloc is a snapshot with its lazily made parts and its status
// bytes: one allocation a Publish, not four.
type snapshotAlloc struct {
	s               Snapshot
	state, presence lazy
	status          [80]byte // {"pbx":"resyncing","version":<20 digits>,"since":<13 digits>} fits
}

func (p *published) snapshot(e *Engine, seq uint64, at int64) *Snapshot {
	a := &snapshotAlloc{}
	a.s = Snapshot{
		Version:     e.version,
		Seq:         seq,
		Link:        e.link,
		Stale:       e.link != LinkLive,
		Since:       e.linkSince,
		At:          at,
		Extensions:  p.exts.cur,
		Queues:      QueueMap{p.queue},
		Parkings:    p.parks,
		Trunks:      TrunkMap{p.trunk},
		Conferences: p.confs,
		extParts:    p.exts.published(),
		extAll:      p.extAll,
		queue:       p.queue,
		park:        p.park,
		trunk:       p.trunk,
		conf:        p.conf,
		status:      slices.Clip(appendStatus(a.status[:0], e.link, e.version, e.linkSince)),
		state:       &a.state,
		cellphones:  e.cfg.Cellphones,
		presence:    &a.presence,
	}
	return &a.s
}

func (p *published) setExt(k string, x, old *ent[Extension]) {
	if !p.exts.changed() {
		p.extAll = &lazy{}
	}
	p.exts.set(k, x, old)
}

func (p *published) setQueue(k string, x *ent[Queue]) {
	if !p.queueCopied { // the queues' values are read from their entities (QueueMap)
		p.queue, p.queueCopied = p.queue.clone(), true
	}
	p.queue.ents[k] = x
}

func (p *published) setPark(k string, x *ent[Parking]) {
	if !p.parkCopied {
		p.parks, p.park, p.parkCopied = maps.Clone(p.parks), p.park.clone(), true
	}
	p.parks[k], p.park.ents[k] = x.v, x
}

func (p *published) setTrunk(k string, x *ent[Trunk]) {
	if !p.trunkCopied { // the trunks' values are read from their entities (TrunkMap)
		p.trunk, p.trunkCopied = p.trunk.clone(), true
	}
	p.trunk.ents[k] = x
}

// convsOf derives the conversations of an owner's channels.
func (e *Engine) convsOf(chans []*channel) map[string]Conversation {
	if len(chans) == 0 {
		return nil
	}
	m := make(map[string]Conversation, len(chans))
	for _, c := range chans {
		if !c.gone {
			e.chanConvs(c, func(cv Conversation) { m[cv.ID] = cv })
		}
	}
	return m
}

// chanConvs derives a channel's conversations: its own, and the held one
// of a transferer consulting.
func (e *Engine) chanConvs(c *channel, yield func(Conversation)) {
	if cv := e.convFor(c); cv.ID != "" {
		yield(cv)
	}
	if c.consulting() {
		if cv, ok := e.heldConv(c); ok {
			yield(cv)
		}
	}
}

// extView is x as published, its conversations derived afresh; kept
// reports whether they equal prev's (the published ones: the batch
// changed x's status, or a linked channel's event left x's calls as they
// were). Then the view holds prev itself when it is not nil (nil when x
// has no channels, as convsOf), so comparing the view and counting what
// it shows skip the conversations.
func (e *Engine) extView(x *extState, prev map[string]Conversation) (v Extension, kept bool) {
	convs, kept := e.extConvs(x.chans, prev)
	status := e.userStatus(x)
	if x.dnd && status == "online" {
		status = "dnd" // idle but refusing calls; in a call, the call shows
	}
	return Extension{
		Exten:         x.exten,
		Name:          e.extName(x),
		Status:        status,
		DND:           x.dnd,
		CF:            x.cf,
		CFB:           x.cfb,
		CFU:           x.cfu,
		IP:            x.ip,
		Port:          x.port,
		SIPUserAgent:  x.ua,
		ChanType:      x.chanType,
		Context:       x.context,
		Voicemail:     x.vm,
		Conversations: convs,
	}, kept
}

// extConvs is convsOf(chans), prev itself when they equal prev's, and
// whether they do (kept, as convsEqual answers: nil and empty are equal).
// They are derived into a buffer on the stack (an extension has a few); a
// map is made only when they changed, and compared with prev only when
// convsAre could not tell.
func (e *Engine) extConvs(chans []*channel, prev map[string]Conversation) (m map[string]Conversation, kept bool) {
	if len(chans) == 0 {
		return nil, len(prev) == 0
	}
	var few [4]Conversation
	d := few[:0]
	for _, c := range chans {
		if !c.gone {
			e.chanConvs(c, func(cv Conversation) { d = append(d, cv) })
		}
	}
	kept, sure := convsAre(prev, d)
	if kept && prev != nil {
		return prev, true
	}
	m = make(map[string]Conversation, len(chans))
	for _, cv := range d {
		m[cv.ID] = cv // the last of an id, as convsOf
	}
	if !sure {
		if kept = convsEqual(prev, m); kept && prev != nil {
			return prev, true
		}
	}
	return m, kept
}

// convsAre reports whether d's conversations, made into a map, equal
// prev's, and whether it could tell (sure). It can when d has at most one
// conversation, or as many as prev and a few: then, checked one by one
// against prev, each must be there, equal, and of a distinct id (two of
// an id make a map smaller than prev). Otherwise it answers false, not
// sure: the map is made and compared.
func convsAre(prev map[string]Conversation, d []Conversation) (equal, sure bool) {
	if len(d) != len(prev) || len(d) > 8 {
		return false, len(d) <= 1
	}
	for i := range d {
		p, ok := prev[d[i].ID]
		if !ok || !convEqual(p, d[i]) {
			return false, true
		}
		for j := range i {
			if d[j].ID == d[i].ID {
				return false, true
			}
		}
	}
	return true, true
}

// trunkView is t's view and whether its conversations changed since the
// last (trunkconvs.go).
func (e *Engine) trunkView(t *trunkState) (Trunk, bool) {
	convs, changed := e.trunkConvsOf(t)
	return Trunk{
		Name:          t.name,
		Status:        t.status,
		Registration:  t.registration,
		ChanType:      t.chanType,
		Conversations: convs,
	}, changed
}

// view is q as a snapshot shows it, its members and waiting callers the
// maps the last view handed out unless they changed since (mc and wc say
// whether they did), its members' pieces brought up to date (made again
// when members changed).
func (q *queueState) view() (v Queue, mc, wc bool) {
	members, mc := q.members.publish()
	keys, known := q.members.changes()
	switch {
	case q.pieces == nil || mc && !known:
		q.pieces = q.pieces.update(members)
	case mc:
		q.pieces = q.pieces.apply(members, keys)
	}
	waiting, wc := q.waiting.publish()
	return Queue{
		Queue:          q.name,
		Name:           q.name,
		Number:         q.number,
		Members:        members,
		WaitingCallers: waiting,
		Completed:      q.completed,
		ServiceLevel:   q.serviceLevel,
		CompletedInSL:  q.completedInSL,
		AbandonedInSL:  q.abandonedInSL,
		Abandoned:      q.abandoned,
		HoldTime:       q.holdTime,
		TalkTime:       q.talkTime,
		pieces:         q.pieces,
	}, mc, wc
}

// queueFieldsEqual compares all but the members and waiting callers.
func queueFieldsEqual(a, b *Queue) bool {
	return a.Queue == b.Queue && a.Name == b.Name && a.Number == b.Number && a.Completed == b.Completed &&
		a.Abandoned == b.Abandoned && a.HoldTime == b.HoldTime && a.TalkTime == b.TalkTime &&
		a.ServiceLevel == b.ServiceLevel && a.CompletedInSL == b.CompletedInSL && a.AbandonedInSL == b.AbandonedInSL
}

func queueEqual(a, b *Queue) bool {
	return queueFieldsEqual(a, b) && maps.EqualFunc(a.Members, b.Members, same) && maps.EqualFunc(a.WaitingCallers, b.WaitingCallers, same)
}

// same compares the values two pointers point to (a queue's members and
// waiting callers).
func same[V comparable](a, b *V) bool { return *a == *b }

// queueSame is queueEqual of a queue and its view, whose members (mc
// false) or waiting callers (wc false) are known to be the last view's
// or equal to them.
func queueSame(a, b *Queue, mc, wc bool) bool {
	return queueFieldsEqual(a, b) && (!mc || maps.EqualFunc(a.Members, b.Members, same)) && (!wc || maps.EqualFunc(a.WaitingCallers, b.WaitingCallers, same))
}

func (p *parkState) view() Parking {
	v := Parking{Parking: p.space, Name: p.space, Timeout: p.timeout}
	if p.caller != nil {
		c := *p.caller
		v.ParkedCaller = &c
	}
	return v
}

func sortedSet[K comparable](m map[K]struct{}, less func(a, b K) int) []K {
	return appendSortedFunc(make([]K, 0, len(m)), m, less)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func itoa(n int) string { return strconv.Itoa(n) }
