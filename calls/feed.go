package calls

import "sync"

// Change is one feed entry: the new JSON of an entity, or an event.
type Change struct {
	Seq  uint64
	Type ChangeType
	Key  string // extension number, queue name, "queue/member", space, trunk name, or "pbx"
	Data []byte // JSON in class Full; the same bytes as in the snapshot, never modified
	At   int64  // ms since the epoch of the Publish that produced it

	// ent is the entity's JSON by class (nil: Data in every class) and,
	// for the types whose readers take values (the accessors below), the
	// value Data encodes. Change stays 80 bytes: the feed's ring and every
	// Feed.Since copy are of them.
	ent classed
}

// Hangup is a conversation that ended by its own channel's Hangup: the
// channel's Uniqueid (the conversation's UniqueID) and the Hangup
// event's Cause, a Q.850 cause code (16 normal clearing, 17 user busy,
// 21 call rejected...); -1 when the event had none.
type Hangup struct {
	UniqueID string
	Cause    int
}

// JSON is the change's JSON in class c: Data, or the same entity with
// the numbers hidden (made at most once, and shared with the snapshot),
// or nil when the entity has changed since (a newer change of it follows
// in the feed: skip this one). Changes with nothing to hide (presence,
// queue members, pbxStatus, extenRinging: only for the rung extension's
// owners) are Data in every class.
func (c *Change) JSON(cl Class) []byte {
	if c.ent == nil || cl == Full {
		return c.Data
	}
	return c.ent.json(cl)
}

// A delta change says what changed in its entity (trunkConversations,
// queueMembers), with the entity whole at hand while it is the latest.
type delta interface{ wholeJSON(Class) []byte }

// Whole is a delta change's entity, whole, in class cl: a
// trunkConversations' trunk (a trunkUpdate's data), a queueMembers'
// queue (a queueUpdate's data); nil when the entity has changed since (a
// newer change of it follows in the feed) or the change is no delta.
func (c *Change) Whole(cl Class) []byte {
	d, ok := c.ent.(delta)
	if !ok {
		return nil
	}
	return d.wholeJSON(cl)
}

// Hangups is, on an extenUpdate, the conversations the extension had
// when last published whose own channel hung up since (so the update
// drops them), with Asterisk's causes; nil when none did, and for any
// other change.
func (c *Change) Hangups() []Hangup {
	if r, ok := c.ent.(*feedRef[Extension]); ok {
		return r.hangups
	}
	return nil
}

// Extension is an extenUpdate's extension as Data encodes it. It stays
// reachable from the change whatever follows (a reader following calls
// sees every state), so the feed keeps up to its size of them alive.
func (c *Change) Extension() (*Extension, bool) {
	r, ok := c.ent.(*feedRef[Extension])
	if !ok || r.keep == nil {
		return nil, false
	}
	return r.keep, true
}

// ExtensionChange is the extenUpdate of x at at (ms), numbered seq, as
// the engine makes it: for readers' tests and for feeds built by hand.
func ExtensionChange(seq uint64, x *Extension, at int64) Change {
	e := newEnt(*x, at, nil, appendExtension, 256)
	return Change{Seq: seq, Type: ExtenUpdate, Key: x.Exten, Data: e.full, At: at, ent: e.announceKeeping(nil)}
}

// Ringing is what an extenRinging says: the rung extension's channel,
// its caller and the call's queue and conversation.
type Ringing struct {
	Exten, CallerNum, CallerName, Queue, Convid, PhonebookName string
}

// Ringing is an extenRinging's value.
func (c *Change) Ringing() (*Ringing, bool) {
	x, ok := c.ent.(*valued[Ringing])
	if !ok {
		return nil, false
	}
	return &x.v, true
}

// Presence is what a userPresenceUpdate says: the extension's presence
// (PresenceOf).
type Presence struct{ Exten, Status string }

// Presence is a userPresenceUpdate's value.
func (c *Change) Presence() (*Presence, bool) {
	x, ok := c.ent.(*valued[Presence])
	if !ok {
		return nil, false
	}
	return &x.v, true
}

// valued is a notification's value and its JSON, the same in every class
// (ringing, presence): what its Change's ent holds.
type valued[V any] struct {
	v    V
	full []byte
}

func (x *valued[V]) json(Class) []byte { return x.full }

// valueChange is the change of type typ of v, encoded by encode (for PBX
// pbx: "" the default), keyed key.
func valueChange[V any](typ ChangeType, key string, v V, at int64, pbx string, encode func([]byte, *V, string) []byte) Change {
	x := &valued[V]{v: v}
	x.full = encode(nil, &x.v, pbx)
	return Change{Type: typ, Key: key, Data: x.full, At: at, ent: x}
}

// Conference is the room of a conferenceUpdate (no users when it ended).
func (c *Change) Conference() (*Conference, bool) {
	x, ok := c.ent.(*ent[Conference])
	if !ok {
		return nil, false
	}
	return &x.v, true
}

// ConferenceJSONFor is a conferenceUpdate's JSON for a reader who sees the
// calls of the members whose extenId sees says yes to (as
// Snapshot.ConferenceJSONFor); Data for any other change.
func (c *Change) ConferenceJSONFor(sees func(exten string) bool) []byte {
	x, ok := c.ent.(*ent[Conference])
	if !ok {
		return c.Data
	}
	return conferenceFor(x, sees)
}

// Feed is the seq-numbered change log: a bounded ring of the latest
// changes. The engine appends (never blocking on readers); any number of
// goroutines read it concurrently.
type Feed struct {
	mu   sync.RWMutex // guards everything below
	run               // the current run's changes
	base uint64       // seq the current run began after (Restart, Adopt): Generation
	prev run          // the run before the current one, as Adopt left it: Previous
	wake chan struct{}
}

// run is a ring buffer of changes: a feed's current run, or the one
// Adopt replaced (Feed.prev).
type run struct {
	buf  []Change
	head int    // index of the oldest change
	n    int    // changes held
	last uint64 // seq of the newest change, 0 when none yet
}

// DefaultFeedSize is Config.FeedSize's default.
const DefaultFeedSize = 10000

func newFeed(size int) *Feed {
	if size <= 0 {
		size = DefaultFeedSize
	}
	return &Feed{run: run{buf: make([]Change, size)}, wake: make(chan struct{})}
}

// append numbers the changes and stores them; it returns the last seq.
func (f *Feed) append(cs []Change) uint64 {
	if len(cs) == 0 {
		f.mu.RLock()
		defer f.mu.RUnlock()
		return f.last
	}
	f.mu.Lock()
	for _, c := range cs {
		f.last++
		c.Seq = f.last
		i := (f.head + f.n) % len(f.buf)
		f.buf[i] = c
		if f.n < len(f.buf) {
			f.n++
		} else {
			f.head = (f.head + 1) % len(f.buf)
		}
	}
	last := f.last
	wake := f.wake
	f.wake = make(chan struct{})
	f.mu.Unlock()
	close(wake)
	return last
}

// LastSeq is the seq of the newest change (0 before the first).
func (f *Feed) LastSeq() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.last
}

// Since returns the changes after seq, oldest first. ok is false when some
// of them fell out of the buffer (the reader must start from a snapshot) or
// when seq is ahead of the feed.
func (f *Feed) Since(seq uint64) (changes []Change, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.run.since(seq)
}

// since is Since of the changes r holds.
func (r *run) since(seq uint64) (changes []Change, ok bool) {
	if seq > r.last {
		return nil, false
	}
	oldest := r.last - uint64(r.n) + 1 // seq of buf[head]
	if seq+1 < oldest {
		return nil, false
	}
	k := int(r.last - seq)
	out := make([]Change, k)
	start := r.n - k
	for i := range k {
		out[i] = r.buf[(r.head+start+i)%len(r.buf)]
	}
	return out, true
}

// Wait returns a channel closed at the next append: wait on it, then call
// Since. Take it before reading LastSeq/Since so no append is missed.
func (f *Feed) Wait() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.wake
}
