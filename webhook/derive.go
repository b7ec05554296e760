package webhook

import (
	"fmt"
	"strings"

	"github.com/ctibridge/ctibridge/calls"
)

// conv is a conversation as the engine publishes it: the tracker reads
// its ids, direction, counterpart, answer time, queue and trunk.
type conv = calls.Conversation

// leg is a call of an extension the tracker follows: one channel
// (uniqueid) of that extension, with the events already raised for it.
type leg struct {
	conv
	rang     bool // the ringing event was raised
	answered bool // the answered event was raised
}

// tracker turns the successive states of extensions into call events: a
// channel appearing unconnected on an incoming call rings, its first
// connection answers, its disappearance hangs up. It follows channels,
// not conversation ids, so a conversation re-keyed by a transfer or a
// queue is the same call. Owned by Service.Run's goroutine.
type tracker struct {
	pbx    string                     // a named PBX's name: events qualified (Event.PBX); "" the default
	legs   map[string]map[string]*leg // by extension, then uniqueid
	lookup func(number string) string // phonebook name of a number; may be nil
	scope  func(exten string) bool    // is the extension of interest to any webhook
	seen   map[string]bool            // scratch for apply
	win    *window                    // a generation's replay under way (window.go); nil: none
}

func newTracker(pbx string, lookup func(string) string, scope func(string) bool) *tracker {
	return &tracker{pbx: pbx, legs: map[string]map[string]*leg{}, lookup: lookup, scope: scope, seen: map[string]bool{}}
}

// change applies one feed change, calling emit for each event. Changes
// other than extenUpdate, and those of extensions out of scope, cost a
// comparison; an extension without calls before or after, two.
func (t *tracker) change(c *calls.Change, emit func(*Event)) error {
	if c.Type != calls.ExtenUpdate || !t.scope(c.Key) {
		return nil
	}
	x, ok := c.Extension()
	if !ok {
		return fmt.Errorf("webhook: extension %s at seq %d: a change without its extension", c.Key, c.Seq)
	}
	if len(t.legs[c.Key]) == 0 && len(x.Conversations) == 0 {
		return nil
	}
	t.apply(c.Key, x.Conversations, c.At, emit)
	return nil
}

// seed takes the calls in progress in snap without raising events (a
// start: whatever they did before, this process did not see).
func (t *tracker) seed(snap *calls.Snapshot) {
	for k, x := range snap.Extensions.All() {
		if t.scope(k) {
			t.apply(k, x.Conversations, snap.At, nil)
		}
	}
}

// resync brings the tracker to snap after a gap in the feed, raising the
// events that the difference implies (calls gone hang up, new ones ring
// or answer).
func (t *tracker) resync(snap *calls.Snapshot, emit func(*Event)) {
	t.dropMissing(snap, emit)
	for k, x := range snap.Extensions.All() {
		if t.scope(k) {
			t.apply(k, x.Conversations, snap.At, emit)
		}
	}
}

// dropMissing hangs up the calls of the extensions snap does not have.
func (t *tracker) dropMissing(snap *calls.Snapshot, emit func(*Event)) {
	for k := range t.legs {
		if _, ok := snap.Extensions.Lookup(k); !ok {
			t.apply(k, nil, snap.At, emit)
		}
	}
}

// apply compares exten's conversations now (at ms) with the legs
// followed; emit, when not nil, receives the events.
func (t *tracker) apply(exten string, convs map[string]conv, ms int64, emit func(*Event)) {
	legs := t.legs[exten]
	clear(t.seen)
	for id, c := range convs {
		if c.UniqueID == "" {
			continue
		}
		t.seen[c.UniqueID] = true
		l := legs[c.UniqueID]
		if l == nil {
			if legs == nil {
				legs = map[string]*leg{}
				t.legs[exten] = legs
			}
			if l = t.win.back(exten, c.UniqueID); l == nil {
				l = &leg{conv: c}
				// Taken silently (seed): no ringing for it later either.
				l.rang = emit == nil
			}
			legs[c.UniqueID] = l
		}
		// The latest counterpart and queue: a queue call connects with
		// the agent who answered. Keys stay those of the first sight.
		linked := l.LinkedID
		l.conv = c
		if linked != "" {
			l.LinkedID = linked
		}
		// It rings once the caller's side is known: the engine shows a
		// callee channel first (id ">callee") and links the caller's
		// channel, its number and queue a moment later.
		if !l.rang && !c.Connected && c.Direction == "in" && (c.CounterpartNum != "" || !strings.HasPrefix(id, ">")) {
			l.rang = true
			t.ringing(exten, l, ms, emit)
		}
		if c.Connected && !l.answered {
			l.answered, l.rang = true, true
			if emit != nil {
				e := t.event(exten, l, TypeAnswered, ms)
				emit(&e)
			}
		}
	}
	for id, l := range legs {
		if t.seen[id] {
			continue
		}
		delete(legs, id)
		switch {
		case t.win != nil:
			t.win.hold(exten, id, l, ms) // hung up at the replay's end, unless back
		case emit != nil:
			e := t.hangup(exten, l, ms)
			emit(&e)
		}
	}
	if len(legs) == 0 {
		delete(t.legs, exten)
	}
}

// hangup is the hangup event of l, gone at ms, with its talk time.
func (t *tracker) hangup(exten string, l *leg, ms int64) Event {
	e := t.event(exten, l, TypeHangup, ms)
	var talk int64
	if l.answered && l.AnsweredAt > 0 && ms > l.AnsweredAt {
		talk = (ms - l.AnsweredAt) / 1000
	}
	answered := l.answered
	e.Answered, e.Duration = &answered, &talk
	return e
}

// ringing raises the ringing event of l, with the phonebook's name.
func (t *tracker) ringing(exten string, l *leg, ms int64, emit func(*Event)) {
	e := t.event(exten, l, TypeRinging, ms)
	if t.lookup != nil && l.CounterpartNum != "" {
		if name := t.lookup(l.CounterpartNum); name != "" {
			e.Phonebook = &Match{Name: name}
		}
	}
	emit(&e)
}

// event is the common part of a call event about l, its ids qualified
// for a named PBX (the default PBX's as they are).
func (t *tracker) event(exten string, l *leg, typ string, ms int64) Event {
	q := func(id string) string { return calls.QualifyID(t.pbx, id) }
	linked, unique := q(l.LinkedID), q(l.UniqueID)
	return Event{
		ID:   linked + ":" + unique + ":" + typ,
		Type: typ, At: stamp(ms), Extension: q(exten), PBX: t.pbx, LinkedID: linked, UniqueID: unique,
		Direction: l.Direction, Number: l.CounterpartNum, Name: l.CounterpartName,
		Queue: q(l.QueueID), Trunk: l.ThroughTrunk,
	}
}
