package bus

import (
	"errors"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// Replay applies one message of ops recorded by another replica. A message
// that does not decode is refused whole, before any of it is applied
// (ErrCorrupt): the engine stays as it was.
func (r *Replica) Replay(data []byte) error {
	if r.shadow != nil {
		return r.replayShadow(data)
	}
	d := decoder{b: data}
	if k := d.header(); d.err == nil && k != kindOps {
		d.fail("kind %d is not ops", k)
	}
	if d.err != nil {
		return d.err
	}
	// First pass: check the whole message and collect the lookups' answers
	// (an op's lookups are recorded after it).
	// An op's lookups are in its own message: none outlives it.
	defer clear(r.names)
	defer clear(r.rings)
	if err := r.scan(d); err != nil {
		return err
	}
	var t int64
	for len(d.b) > 0 {
		op := d.byte()
		if op == opName || op == opRing {
			d.lookup(op)
			continue
		}
		t += d.varint()
		r.now = time.Unix(0, t)
		r.apply(op, &d)
	}
	return d.err
}

// scan checks a message and queues its lookups' answers.
func (r *Replica) scan(d decoder) error {
	for len(d.b) > 0 {
		op := d.byte()
		switch op {
		case opName:
			num, name := d.string(), d.string()
			r.names[num] = append(r.names[num], name)
			continue
		case opRing:
			ext, num, name := d.string(), d.string(), d.string()
			r.rings[ext+"\x00"+num] = append(r.rings[ext+"\x00"+num], name)
			continue
		}
		d.varint()
		d.args(op)
	}
	return d.err
}

// walkOps calls f with each op of a message but the lookup answers, until
// f returns false, and returns the decoding error.
func walkOps(data []byte, f func(op byte) bool) error {
	d := decoder{b: data}
	d.header()
	for len(d.b) > 0 && d.err == nil {
		op := d.byte()
		if op == opName || op == opRing {
			d.lookup(op)
			continue
		}
		d.varint()
		if !f(op) {
			return nil
		}
		d.args(op)
	}
	return d.err
}

// lookup skips a lookup answer (queued by scan).
func (d *decoder) lookup(op byte) {
	d.string()
	d.string()
	if op == opRing {
		d.string()
	}
}

// args skips an op's arguments.
func (d *decoder) args(op byte) {
	switch op {
	case opApply, opReconcileItem, opAnswerItem:
		d.message()
	case opAnswerEnd:
		d.message()
		d.message()
		d.answerErr()
	case opSetLink, opFollowups:
		d.byte()
	case opApplyAnswer:
		d.message()
		d.message()
		d.messages()
		d.answerErr()
	case opPublish, opBeginResync, opEndResync, opBeginReconcile, opRefresh, opReconcile:
	default:
		d.fail("unknown op %d", op)
	}
}

func (d *decoder) answerErr() error {
	switch k := d.byte(); k {
	case errNone:
		return nil
	case errAction:
		a := d.string()
		return &ami.ActionError{Action: a, Message: d.string()}
	case errOther:
		return errors.New(d.string())
	default:
		d.fail("unknown error kind %d", k)
		return nil
	}
}

// apply runs one op (already checked by scan).
func (r *Replica) apply(op byte, d *decoder) {
	e := r.eng
	switch op {
	case opApply:
		e.Apply(d.message())
	case opPublish:
		e.Publish()
	case opSetLink:
		e.SetLink(calls.LinkState(d.byte()))
	case opBeginResync:
		e.BeginResync()
	case opEndResync:
		e.EndResync()
	case opBeginReconcile:
		e.BeginReconcile()
	case opReconcileItem:
		r.items = append(r.items, d.message())
	case opReconcile:
		e.Reconcile(r.items)
		r.items = nil
	case opFollowups:
		e.Followups(calls.FollowupKind(d.byte()))
	case opApplyAnswer:
		action := d.message()
		resp := ami.Response{Message: d.message()}
		resp.Items = d.messages()
		e.ApplyAnswer(action, resp, d.answerErr())
	case opAnswerItem:
		r.answer = append(r.answer, d.message())
	case opAnswerEnd:
		action := d.message()
		resp := ami.Response{Message: d.message(), Items: r.answer}
		r.answer = nil
		e.ApplyAnswer(action, resp, d.answerErr())
	case opRefresh:
		e.RefreshDurations()
	}
}
