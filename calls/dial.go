package calls

// The dial events (DialBegin, DialState, DialEnd): who rings whom, and
// what the caller's and the dialled channel learn of each other.

import (
	"cmp"

	"github.com/ctibridge/ctibridge/ami"
)

// dialPair returns the calling (may be nil for Originate) and dialled
// channels of a Dial* or Agent* event, from its dialKeys.
func (e *Engine) dialPair(h *chanHdrs) (src, dst *channel) {
	src = e.chanBy(h.v[hUniqueid], h.v[hChannel])
	dst = e.chanBy(h.v[hDestUniqueid], h.v[hDestChannel])
	if dst == nil || (src == nil && h.v[hChannel] != "") {
		e.stats.Unknown++
	}
	return src, dst
}

func (e *Engine) onDialBegin(m ami.Message) {
	h := readHdrs(m, dialKeys)
	src, dst := e.dialPair(&h)
	if src != nil {
		e.updateFrom(src, &h)
	}
	if dst == nil {
		return
	}
	if src == nil {
		if h.v[hChannel] == "" {
			dst.originated = true // Originate: the PBX rings the device
		}
	} else {
		src.dialledOut = true
		src.prevBridge = nil // sent to the dialplan: a blind transfer, not a consult
		if !containsChan(src.dialTargets, dst) {
			src.dialTargets = append(src.dialTargets, dst)
		}
		dst.dialledBy = src
		// The second half of a Local pair dials for the first: a queue's
		// Local member (Local/203@from-queue/n) rings the phone for the
		// queue's caller.
		from := src
		if src.local && src.partner != nil {
			from = src.partner
		}
		if src.kind == ownerTrunk || src.viaTrunk || from.viaTrunk {
			dst.viaTrunk = true
		}
		if q := cmp.Or(src.queue, from.queue); q != "" && dst.queue == "" {
			dst.queue = q
		}
	}
	e.changed(dst)
}

func (e *Engine) onDialState(m ami.Message) {
	h := readHdrs(m, dialKeys)
	src, dst := e.dialPair(&h)
	if src != nil {
		e.updateFrom(src, &h)
	}
	if dst != nil {
		if h.has(hDestChannelState) {
			if st := atoi(h.v[hDestChannelState]); st != dst.state {
				dst.state = st
				if st == stateRinging {
					e.noteRinging(dst)
				}
			}
		}
		e.changed(dst)
	}
}

func (e *Engine) onDialEnd(m ami.Message) {
	h := readHdrs(m, dialKeys)
	src, dst := e.dialPair(&h)
	if src != nil {
		e.updateFrom(src, &h)
	}
	if dst == nil {
		return
	}
	if h.v[hDialStatus] != "ANSWER" && src != nil {
		// Busy, cancelled, no answer: that target is no longer dialled.
		for i, t := range src.dialTargets {
			if t == dst {
				src.dialTargets = append(src.dialTargets[:i], src.dialTargets[i+1:]...)
				break
			}
		}
	}
	e.changed(dst)
}
