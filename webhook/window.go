package webhook

import (
	"cmp"
	"slices"

	"github.com/ctibridge/ctibridge/calls"
)

// A rollover of the bus's op log (docs/scale-out.md, "Generations")
// builds the new generation on a shadow engine while the engine the
// reader follows shows the old state, stale; then that engine adopts the
// shadow's (calls.Engine.Adopt): its feed jumps past the reader's seq
// and holds the changes the new generation made from a new engine's
// state: the resync's lists, and the calls that rang, were answered and
// hung up meanwhile. The reader replays them (calls.Feed.Generation)
// rather than resynchronising from the snapshot alone, which would miss
// a call wholly inside that window. Before, it applies as live what it
// had not read of the old generation (calls.Feed.Previous; pump): a
// reader behind at the adoption would otherwise lose a call whose whole
// life was in those changes (TestRolloverUnreadTail).
//
// A new engine's state is filled piecemeal, so a call in progress can be
// missing from some of those states: a leg that disappears during the
// replay is held, and hung up at the replay's end only if it did not come
// back. The events of the replay are sent at its end, in the order of the
// changes that raised them (a held hangup at the change where its leg
// disappeared), each once: the ids are those of the legs the tracker
// already follows.

// window is a generation's replay under way (tracker.win).
type window struct {
	seq     uint64          // the change being replayed
	events  []windowEvent   // raised so far, in the order raised
	held    []heldLeg       // legs gone, in the order they went; l nil once back
	heldAt  map[legKey]int  // index in held of a leg gone and not back
	touched map[string]bool // extensions a replayed change named
}

type legKey struct{ exten, uid string }

type heldLeg struct {
	exten string
	l     *leg
	ms    int64  // when it went
	seq   uint64 // the change where it went
}

type windowEvent struct {
	seq uint64
	e   Event
}

// replay applies a generation's changes cs (calls.Feed.Generation) with
// the window's rules, then brings the extensions no change named to snap
// (what a new engine holds without a change: nothing, or configured
// extensions without calls), and emits the events. bad is called with
// the error of a change that cannot be decoded (skipped).
func (t *tracker) replay(cs []calls.Change, snap *calls.Snapshot, emit func(*Event), bad func(error)) {
	w := &window{heldAt: map[legKey]int{}, touched: map[string]bool{}}
	t.win = w
	for i := range cs {
		w.seq = cs[i].Seq
		if cs[i].Type == calls.ExtenUpdate {
			w.touched[cs[i].Key] = true
		}
		if err := t.change(&cs[i], w.emit); err != nil {
			bad(err)
		}
	}
	w.seq = max(w.seq, snap.Seq)
	for k := range t.legs {
		if w.touched[k] {
			continue
		}
		var convs map[string]conv
		if x, ok := snap.Extensions.Lookup(k); ok {
			convs = x.Conversations
		}
		t.apply(k, convs, snap.At, w.emit)
	}
	t.win = nil
	for _, h := range w.held {
		if h.l != nil {
			w.events = append(w.events, windowEvent{h.seq, t.hangup(h.exten, h.l, h.ms)})
		}
	}
	slices.SortStableFunc(w.events, func(a, b windowEvent) int { return cmp.Compare(a.seq, b.seq) })
	for i := range w.events {
		emit(&w.events[i].e)
	}
}

// emit keeps e for the replay's end.
func (w *window) emit(e *Event) { w.events = append(w.events, windowEvent{w.seq, *e}) }

// hold keeps the leg uid of exten, gone at ms, for the replay's end.
func (w *window) hold(exten, uid string, l *leg, ms int64) {
	w.heldAt[legKey{exten, uid}] = len(w.held)
	w.held = append(w.held, heldLeg{exten: exten, l: l, ms: ms, seq: w.seq})
}

// back returns the leg uid of exten if it went during the replay (it is
// not held any more), else nil; nil too without a replay (w nil).
func (w *window) back(exten, uid string) *leg {
	if w == nil {
		return nil
	}
	k := legKey{exten, uid}
	i, ok := w.heldAt[k]
	if !ok {
		return nil
	}
	delete(w.heldAt, k)
	l := w.held[i].l
	w.held[i].l = nil
	return l
}
