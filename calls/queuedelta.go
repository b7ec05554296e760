package calls

import (
	"slices"
	"sync"
)

// A queue's change goes to the feed as what changed in it, a queueMembers
// change:
//
//	{"queue":"401","name":"401","number":"401",
//	 "set":{"<member>":{QueueMember},...},"removed":["<member>",...],
//	 "waitingCallers":{...},"completed":3,"abandoned":0,"holdTime":12,"talkTime":40,
//	 "serviceLevel":60,"completedInServiceLevel":2,"abandonedInServiceLevel":0}
//
// (and "pbx" last, for a named PBX): the queue's fields and its waiting
// callers as the queue has them, the members that are new or changed and
// the keys of those that went, both in key order. A call centre's queue
// has 40 members and changes with each caller who joins or leaves: its
// whole JSON is 8 KB, what changed a few hundred bytes. Applied in feed
// order to the queue as a snapshot holds it, the changes give the queue
// as the snapshot of their last seq holds it
// (TestMixPublishDerivesWhatChanged). The whole queue stays in the
// snapshots (made on first need from its members' pieces) and is reachable from the
// change (Change.Whole) while it is the queue's latest, for readers that
// take a queue whole (the WebSocket's queueUpdate). The waiting callers
// come whole: a caller leaving moves the position of every caller behind
// it.

// queueDelta is a queueMembers change's entity. Like a trunkDelta it is
// never cut: a reader that skipped one would miss what it changed.
type queueDelta struct {
	q       Queue    // the queue: its fields, waiting callers and members (a published map)
	set     []string // keys of q.Members new or changed
	removed []string
	op      Opaquer // the waiting callers' channel names in NumbersHidden
	full    []byte
	once    sync.Once
	hid     []byte
	whole   classed // the queue's entity, cut when it changes again
	// A Publish changes a member or two: the keys start here, inside
	// the delta's own allocation.
	setBuf, removedBuf [2]string
}

// newQueueDelta is the change from members before (nil: none) to v's,
// whole the handle of v's entity. When all is false only the members
// under changed may differ from before (a key may be there twice; none:
// the members are before's); all compares every one.
func newQueueDelta(before map[string]*QueueMember, v *Queue, changed []string, all bool, op Opaquer, whole classed) *queueDelta {
	d := &queueDelta{q: *v, op: op, whole: whole}
	d.q.pieces = nil
	d.set, d.removed = d.setBuf[:0], d.removedBuf[:0]
	now := v.Members
	if before == nil || all {
		for k, mb := range now {
			if was := before[k]; was == nil || was != mb && *was != *mb {
				d.set = append(d.set, k)
			}
		}
		for k := range before {
			if now[k] == nil {
				d.removed = append(d.removed, k)
			}
		}
	} else {
		for i, k := range changed {
			if slices.Contains(changed[:i], k) {
				continue
			}
			mb, was := now[k], before[k]
			switch {
			case mb != nil && (was == nil || *was != *mb):
				d.set = append(d.set, k)
			case mb == nil && was != nil:
				d.removed = append(d.removed, k)
			}
		}
	}
	slices.Sort(d.set)
	slices.Sort(d.removed)
	d.full = d.encode(enc{})
	return d
}

func (d *queueDelta) json(c Class) []byte {
	if c == Full {
		return d.full
	}
	d.once.Do(func() { d.hid = d.encode(enc{hide: true, op: d.op}) })
	return d.hid
}

func (d *queueDelta) encode(e enc) []byte {
	n := 160 + queueCallerSize*len(d.q.WaitingCallers) + 200*len(d.set)
	for _, k := range d.removed {
		n += len(k) + 4
	}
	b := appendSetRemoved(appendQueueFields(make([]byte, 0, n), &d.q), len(d.set),
		func(b []byte, i int) []byte { return appendMemberPiece(b, d.set[i], d.q.Members[d.set[i]]) }, d.removed, appendString)
	return appendQueueTail(b, &d.q, e)
}

func (d *queueDelta) wholeJSON(c Class) []byte { return d.whole.json(c) }
