package bus

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// Ops: one byte each, followed by the op's time (a varint of nanoseconds
// since the previous op of the message, the first since 0) and its
// arguments.
const (
	opApply          = 1  // message
	opPublish        = 2  // -
	opSetLink        = 3  // state byte
	opBeginResync    = 4  // -
	opEndResync      = 5  // -
	opBeginReconcile = 6  // -
	opReconcile      = 7  // - (with the items of the opReconcileItem before it)
	opFollowups      = 8  // kind byte
	opApplyAnswer    = 9  // action, response, items, error
	opRefresh        = 10 // -
	opName           = 11 // number, name: what Config.NameLookup answered (no time)
	opRing           = 12 // exten, number, name: what Config.RingLookup answered (no time)
	opReconcileItem  = 13 // message: one CoreShowChannel item of the next opReconcile
	opAnswerItem     = 14 // message: one item of the next opAnswerEnd's response
	opAnswerEnd      = 15 // action, response, error: ApplyAnswer with the opAnswerItem before it
)

// splitAnswer is the size past which an answer's items are recorded one
// op each (opAnswerItem, opAnswerEnd) rather than in one opApplyAnswer,
// so that a long list is split between messages like a batch.
const splitAnswer = 32 << 10

// Errors of an answer, as ApplyAnswer is given them.
const (
	errNone   = 0
	errAction = 1 // *ami.ActionError: action, message
	errOther  = 2 // anything else: its text
)

// DefaultChunk is the size past which a batch is sent in more than one
// message (a resync of thousands of channels; NATS refuses messages over
// its max_payload, 1 MiB by default).
const DefaultChunk = 256 << 10

// Replica is an engine whose every input is an op: on the node holding the
// PBX link it records (it satisfies link.Engine: each call is forwarded to
// the engine and appended to the batch, and Publish hands the batch to
// flush), and everywhere else it replays (Replay). Clients are always
// served by a replaying replica, on the leading bridge too. The engine reads its clock and the phonebook only through the
// Replica, so the same ops give the same snapshots and feed, byte for
// byte, on every node. Engine goroutine only, except Engine().
type Replica struct {
	eng *calls.Engine
	now time.Time    // the engine's clock: the time of the op being applied
	cfg calls.Config // as given to NewReplica: a shadow's (rollover.go)

	realName func(string) string
	realRing func(string, string) string

	// Recording (the link's goroutine).
	clock   func() time.Time
	buf     []byte
	last    int64 // UnixNano of the previous op in buf
	flush   func(data []byte, final bool) error
	chunk   int
	err     error // the first Flush error: every later call is refused
	onError func(error)
	// maxMsg, when set, is the largest message the stream takes (the
	// servers' max_payload less a margin for lookups): an op that does
	// not fit after the batch so far starts a message, one larger than
	// a message is dropped, and onDrop told (fit).
	maxMsg   int
	onDrop   func(op byte, size int)
	opStart  int   // where the op being recorded starts in buf
	prevLast int64 // last before it
	// roll: a new generation is due (rollover.go); the next op starts it
	// with onRoll's genesis.
	roll   atomic.Bool
	onRoll func() (genesis, error)

	// Replaying.
	names  map[string][]string
	rings  map[string][]string
	items  []ami.Message // opReconcileItem since the last opReconcile
	answer []ami.Message // opAnswerItem since the last opAnswerEnd
	// shadow builds a new generation while clients keep the old one
	// (rollover.go); shadowing says so to any goroutine.
	shadow    *Replica
	shadowing atomic.Int64 // UnixNano of the genesis being built; 0 when none
}

// NewReplica returns a replica over a new engine built from cfg; cfg.Now,
// NameLookup and RingLookup are taken over (the lookups are asked on the
// recording node and their answers recorded).
func NewReplica(cfg calls.Config) *Replica {
	r := &Replica{cfg: cfg, realName: cfg.NameLookup, realRing: cfg.RingLookup, clock: time.Now, chunk: DefaultChunk,
		names: map[string][]string{}, rings: map[string][]string{}}
	cfg.Now = func() time.Time { return r.now }
	cfg.NameLookup = r.nameLookup
	cfg.RingLookup = r.ringLookup
	r.eng = calls.New(cfg)
	return r
}

// Engine is the engine, for its readers (Snapshot, Feed).
func (r *Replica) Engine() *calls.Engine { return r.eng }

// Record makes the replica record: flush gets each batch (final) or chunk
// of one (not final) and must store it durably before returning nil; its
// first error is passed to onError, and from then on the replica forwards
// nothing more to the engine (the node must step down: its engine may
// hold ops nobody else has). clock, when not nil, replaces time.Now.
func (r *Replica) Record(flush func(data []byte, final bool) error, onError func(error), clock func() time.Time) {
	r.flush, r.onError = flush, onError
	if clock != nil {
		r.clock = clock
	}
}

// ErrStopped is the error of calls made after a Flush failed.
var ErrStopped = errors.New("bus: replica stopped recording after a failed publish")

func (r *Replica) nameLookup(num string) string {
	if r.flush == nil {
		return pop(r.names, num)
	}
	name := ""
	if r.realName != nil {
		name = r.realName(num)
	}
	r.buf = append(r.buf, opName)
	r.buf = appendString(r.buf, num)
	r.buf = appendString(r.buf, name)
	return name
}

func (r *Replica) ringLookup(exten, num string) string {
	if r.flush == nil {
		return pop(r.rings, exten+"\x00"+num)
	}
	name := ""
	if r.realRing != nil {
		name = r.realRing(exten, num)
	} else if r.realName != nil {
		name = r.realName(num)
	}
	r.buf = append(r.buf, opRing)
	r.buf = appendString(r.buf, exten)
	r.buf = appendString(r.buf, num)
	r.buf = appendString(r.buf, name)
	return name
}

// pop takes the next recorded answer for key; when none is left it keeps
// the last one.
func pop(m map[string][]string, key string) string {
	q := m[key]
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	m[key] = q[1:]
	return q[0]
}

// begin starts recording an op: it sends the batch so far as a chunk when
// it is large, then sets the clock and appends the op and its time. It
// returns false when the replica stopped.
func (r *Replica) begin(op byte) bool {
	if r.err != nil {
		return false
	}
	if r.roll.Load() && !r.rollover() {
		return false
	}
	if len(r.buf) >= r.chunk && !r.send(false) {
		return false
	}
	if len(r.buf) == 0 {
		r.buf = append(r.buf, version, kindOps)
		r.last = 0
	}
	r.now = r.clock()
	t := r.now.UnixNano()
	r.opStart, r.prevLast = len(r.buf), r.last
	r.buf = append(r.buf, op)
	r.buf = binary.AppendVarint(r.buf, t-r.last)
	r.last = t
	return true
}

// send hands the batch so far to flush.
func (r *Replica) send(final bool) bool {
	if err := r.flush(r.buf, final); err != nil {
		r.err = err
		if r.onError != nil {
			r.onError(err)
		}
		return false
	}
	r.buf = r.buf[:0]
	return true
}

// fit ends recording an op when the stream's messages are bounded
// (maxMsg): an op larger than a message is dropped (it reports false:
// the engine must not apply it; onDrop is told), one that does not fit
// after the batch so far goes out first as a chunk. A follow-up's
// answer or an AMI frame that large would otherwise refuse every
// publish of every leader in turn.
func (r *Replica) fit() bool {
	if r.maxMsg == 0 || len(r.buf) <= r.maxMsg {
		return true
	}
	op := r.buf[r.opStart]
	size := len(r.buf) - r.opStart
	if size+12 > r.maxMsg { // with a message's header and an absolute time
		r.buf, r.last = r.buf[:r.opStart], r.prevLast
		if r.onDrop != nil {
			r.onDrop(op, size)
		}
		return false
	}
	tail := slices.Clone(r.buf[r.opStart+1:])
	_, n := binary.Varint(tail)
	r.buf = r.buf[:r.opStart]
	if !r.send(false) {
		return false
	}
	t := r.now.UnixNano()
	r.buf = append(r.buf, version, kindOps, op)
	r.opStart = 2
	r.buf = binary.AppendVarint(r.buf, t)
	r.buf = append(r.buf, tail[n:]...)
	r.last = t
	return true
}

// Apply records and applies m.
func (r *Replica) Apply(m ami.Message) {
	if r.begin(opApply) {
		r.buf = appendMessage(r.buf, m)
		if r.fit() {
			r.eng.Apply(m)
		}
	}
}

// Publish ends the batch: the engine publishes (the phonebook lookups it
// makes are recorded), then the batch is handed to flush. The recording
// engine is the link's alone: what clients see comes from a replaying
// replica fed by the stored log, so nobody sees a change the log lacks.
func (r *Replica) Publish() *calls.Snapshot {
	if !r.begin(opPublish) {
		return r.eng.Snapshot()
	}
	s := r.eng.Publish()
	r.send(true)
	return s
}

// SetLink records and applies the link state.
func (r *Replica) SetLink(s calls.LinkState) {
	if r.begin(opSetLink) {
		r.buf = append(r.buf, byte(s))
		r.eng.SetLink(s)
	}
}

// BeginResync records and applies it.
func (r *Replica) BeginResync() {
	if r.begin(opBeginResync) {
		r.eng.BeginResync()
	}
}

// EndResync records and applies it.
func (r *Replica) EndResync() {
	if r.begin(opEndResync) {
		r.eng.EndResync()
	}
}

// BeginReconcile records and applies it.
func (r *Replica) BeginReconcile() {
	if r.begin(opBeginReconcile) {
		r.eng.BeginReconcile()
	}
}

// Reconcile records its items one op each (so that a list of thousands
// of channels can be split between messages), then applies it.
func (r *Replica) Reconcile(items []ami.Message) int {
	k := keeper{all: items}
	for i, m := range items {
		if !r.begin(opReconcileItem) {
			return 0
		}
		r.buf = appendMessage(r.buf, m)
		if !k.item(i, r.fit()) && r.err != nil {
			return 0
		}
	}
	if !r.begin(opReconcile) {
		return 0
	}
	return r.eng.Reconcile(k.list())
}

// keeper tracks the items of a list that fit (fit): the list itself
// until one is dropped.
type keeper struct {
	all, kept []ami.Message
	cut       bool
}

// item notes whether all[i] fit, and returns ok.
func (k *keeper) item(i int, ok bool) bool {
	switch {
	case !ok && !k.cut:
		k.kept, k.cut = slices.Clone(k.all[:i]), true
	case ok && k.cut:
		k.kept = append(k.kept, k.all[i])
	}
	return ok
}

func (k *keeper) list() []ami.Message {
	if k.cut {
		return k.kept
	}
	return k.all
}

// Followups records the call (it changes what the engine asks next).
func (r *Replica) Followups(k calls.FollowupKind) []ami.Message {
	if !r.begin(opFollowups) {
		return nil
	}
	r.buf = append(r.buf, byte(k))
	return r.eng.Followups(k)
}

// ApplyAnswer records and applies a follow-up's answer.
func (r *Replica) ApplyAnswer(action ami.Message, resp ami.Response, err error) {
	if !r.begin(opApplyAnswer) {
		return
	}
	r.buf = appendMessage(r.buf, action)
	r.buf = appendMessage(r.buf, resp.Message)
	r.buf = appendMessages(r.buf, resp.Items)
	if len(r.buf)-r.opStart > splitAnswer {
		r.buf, r.last = r.buf[:r.opStart], r.prevLast
		r.splitAnswer(action, resp, err)
		return
	}
	r.buf = appendAnswerErr(r.buf, err)
	if r.fit() {
		r.eng.ApplyAnswer(action, resp, err)
	}
}

// splitAnswer records a large answer an op per item, then the rest. An
// action and response too large for a message drop the whole answer
// before its items are recorded (a replayer would keep them for the
// next answer).
func (r *Replica) splitAnswer(action ami.Message, resp ami.Response, err error) {
	if r.maxMsg > 0 {
		if n := len(appendMessage(appendMessage(nil, action), resp.Message)) + 64; n > r.maxMsg {
			if r.onDrop != nil {
				r.onDrop(opAnswerEnd, n)
			}
			return
		}
	}
	k := keeper{all: resp.Items}
	for i, m := range resp.Items {
		if !r.begin(opAnswerItem) {
			return
		}
		r.buf = appendMessage(r.buf, m)
		if !k.item(i, r.fit()) && r.err != nil {
			return
		}
	}
	if !r.begin(opAnswerEnd) {
		return
	}
	r.buf = appendMessage(r.buf, action)
	r.buf = appendMessage(r.buf, resp.Message)
	r.buf = appendAnswerErr(r.buf, err)
	if r.fit() {
		resp.Items = k.list()
		r.eng.ApplyAnswer(action, resp, err)
	}
}

// appendAnswerErr appends a follow-up answer's error.
func appendAnswerErr(b []byte, err error) []byte {
	var ae *ami.ActionError
	switch {
	case err == nil:
		return append(b, errNone)
	case errors.As(err, &ae):
		b = append(b, errAction)
		b = appendString(b, ae.Action)
		return appendString(b, ae.Message)
	default:
		b = append(b, errOther)
		return appendString(b, err.Error())
	}
}

// RefreshDurations re-encodes talk times. A refresh that changed nothing
// is not recorded (a follower skipping it stays identical: the engine
// refreshes when the last refresh that ran is old enough, and a skipped
// one never ran on the followers); one that did is a batch of its own,
// stored before it is shown.
func (r *Replica) RefreshDurations() *calls.Snapshot {
	if r.err != nil {
		return r.eng.Snapshot()
	}
	if len(r.buf) > 0 {
		// Ops since the last Publish (follow-up bookkeeping): store them
		// first, as a chunk, so the refresh below is recorded in order.
		if !r.send(false) {
			return r.eng.Snapshot()
		}
	}
	mark := len(r.buf)
	if !r.begin(opRefresh) {
		return r.eng.Snapshot()
	}
	before := r.eng.Snapshot().Version
	s := r.eng.RefreshDurations()
	if s.Version == before {
		r.buf = r.buf[:mark]
		return s
	}
	r.send(true)
	return s
}

// Stats is the engine's.
func (r *Replica) Stats() calls.Stats { return r.eng.Stats() }

// EngineFingerprint names what of an engine configuration must be the
// same on every node for a replay to reach the same state: trunks, queue
// numbers, names and cellphones.
func EngineFingerprint(cfg calls.Config) string {
	h := sha256.New()
	put := func(kv map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			fmt.Fprintf(h, "%q=%q;", k, kv[k])
		}
		h.Write([]byte{0})
	}
	fmt.Fprintf(h, "%q;", cfg.Trunks)
	put(cfg.QueueNumbers)
	put(cfg.Names)
	put(cfg.Cellphones)
	return hex.EncodeToString(h.Sum(nil)[:8])
}
