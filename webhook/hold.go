package webhook

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

// hold keeps what this node derives and takes of a PBX while it does not
// send the PBX's events (Options.Sending, PBX.Sending): its call events
// (the reader's) and its CDRs (the recorder's), each for the last
// CDRHold, oldest first. A takeover sends them (sendHeld), then goes on
// live.
//
// A takeover sends all those of the last CDRHold, though the old sender
// may have sent some (their ids repeat): nothing tells this node which.
// The call events: the old sender's reader may not have read, or its
// queue not yet taken, the last changes its node published before it was
// killed or deposed, and this node read them while standby. The CDRs:
// each bridge's recorder hears every Cdr on its own AMI session, not
// through the op log. The old sender's queue and its receivers' 2xx are
// on its own disk, and a sender that died loses what it had derived or
// taken but not yet written to its disk queue. What it did not send is
// known to no one else, so the hold covers the whole takeover: the
// lease's expiry, the catch-up, the new link's resync, with room for a
// loaded machine. Sending only what the old sender did not confirm would
// need it to publish its confirmations (on the bus, beside the op log).
//
// Bound: what is older than CDRHold is dropped at each hold and at the
// takeover; and at most holdMaxEvents call events are kept (the oldest go
// first), so a flood of calls on a standby cannot grow it without end;
// those are counted (ctibridge_webhook_held_dropped_total) and logged,
// at most once a minute with the count since the last line.
// CDRs are bounded by time only, as each is a call record: their rate is
// the PBX's calls'.
type hold struct {
	mu     sync.Mutex
	events []heldEvent
	cdrs   []heldCDRs
	// holding is that something is held, set and cleared under mu:
	// sendHeld, on every feed wake and live event while sending, reads
	// it instead of taking mu.
	holding atomic.Bool
	// unlogged are the call events dropped by the bound since the last
	// log line about it, at loggedDrop. Under mu.
	unlogged   int
	loggedDrop time.Time
}

// holdDropLogEvery spaces the log lines of a hold that drops events.
const holdDropLogEvery = time.Minute

// holdMaxEvents bounds the call events a PBX's hold keeps: some 500
// bytes each, a few MB, and some 300 events a second over CDRHold's
// default 30 s.
const holdMaxEvents = 10000

// heldEvent is a call event derived while not sending, and when.
type heldEvent struct {
	at time.Time
	e  Event
}

// heldCDRs are CDRs taken while not sending, and when.
type heldCDRs struct {
	at   time.Time
	cdrs []history.CDR
}

// CDRs queues the cdr events of CDRs the recorder has taken
// (history.RecorderConfig.OnTaken), or holds them while this node does
// not send their PBX's events. A named PBX's CDRs have its qualified
// uniqueid (cmd/ctibridge qualifyCDRs). It never blocks. Safe from any
// goroutine.
func (s *Service) CDRs(cdrs []history.CDR) {
	if len(s.readers) == 1 {
		s.cdrsOf(s.readers[0], cdrs)
		return
	}
	by := make([][]history.CDR, len(s.readers))
	for _, c := range cdrs {
		pbx, _ := calls.SplitID(c.UniqueID, s.known)
		i := slices.IndexFunc(s.readers, func(r *reader) bool { return r.pbx == pbx })
		by[i] = append(by[i], c)
	}
	for i, cs := range by {
		if len(cs) > 0 {
			s.cdrsOf(s.readers[i], cs)
		}
	}
}

// cdrsOf queues or holds cdrs, r's PBX's.
func (s *Service) cdrsOf(r *reader, cdrs []history.CDR) {
	if !r.sending() {
		s.holdCDRs(r, cdrs)
		return
	}
	s.sendHeld(r)
	s.queueCDRs(cdrs)
}

// eventOf queues or holds e, a call event of r's PBX (reader.emit).
func (s *Service) eventOf(r *reader, e *Event) {
	if !r.sending() {
		s.holdEvent(r, e)
		return
	}
	s.sendHeld(r) // the held ones first, were the takeover between pump's check and e
	s.emit(e)
}

// holdCDRs keeps cdrs of r's PBX for CDRHold.
func (s *Service) holdCDRs(r *reader, cdrs []history.CDR) {
	h := &r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.expire(now, s.opts.CDRHold)
	h.cdrs = append(h.cdrs, heldCDRs{at: now, cdrs: slices.Clone(cdrs)})
	h.holding.Store(true)
}

// holdEvent keeps a copy of e, a call event of r's PBX, for CDRHold.
func (s *Service) holdEvent(r *reader, e *Event) {
	h := &r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.expire(now, s.opts.CDRHold)
	if len(h.events) >= holdMaxEvents {
		n := len(h.events) - holdMaxEvents + 1
		h.events = h.events[n:]
		s.heldDropped.Add(uint64(n))
		h.unlogged += n
		if now.Sub(h.loggedDrop) >= holdDropLogEvery {
			s.log.Warn("webhook: the hold of a PBX not sent is full: its oldest call events dropped, a takeover will not send them",
				"pbx", r.pbx, "dropped", h.unlogged, "max_events", holdMaxEvents)
			h.unlogged, h.loggedDrop = 0, now
		}
	}
	h.events = append(h.events, heldEvent{at: now, e: *e})
	h.holding.Store(true)
}

// expire drops what was held longer than d before now. h.mu held.
func (h *hold) expire(now time.Time, d time.Duration) {
	i, _ := slices.BinarySearchFunc(h.events, now.Add(-d), func(x heldEvent, t time.Time) int { return x.at.Compare(t) })
	h.events = h.events[i:]
	j, _ := slices.BinarySearchFunc(h.cdrs, now.Add(-d), func(x heldCDRs, t time.Time) int { return x.at.Compare(t) })
	h.cdrs = h.cdrs[j:]
}

// sendHeld queues what r's PBX's hold kept in the last CDRHold, once
// sending (in ordered's order). Nearly always nothing is held: then it
// takes no lock. A hold that returned before it is called is seen
// (holding is stored after the append), and holding stays set until
// the held ones are queued, so a live event of another goroutine does
// not pass them.
func (s *Service) sendHeld(r *reader) {
	h := &r.held
	if !h.holding.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire(time.Now(), s.opts.CDRHold)
	for _, x := range h.ordered() {
		if x.e != nil {
			s.emit(x.e)
		} else {
			s.queueCDRs(x.cdrs)
		}
	}
	h.events, h.cdrs = nil, nil
	h.holding.Store(false)
}

// heldItem is a held call event or a held batch of CDRs.
type heldItem struct {
	key  time.Time
	e    *Event
	cdrs []history.CDR
}

// ordered lists what h holds oldest first, but the call events of a call
// before its CDRs: a batch of CDRs goes after the last held event of
// their calls (linkedid) when that is later. h.mu held.
func (h *hold) ordered() []heldItem {
	last := map[string]time.Time{}
	out := make([]heldItem, 0, len(h.events)+len(h.cdrs))
	for i := range h.events {
		x := &h.events[i]
		last[x.e.LinkedID] = x.at
		out = append(out, heldItem{key: x.at, e: &x.e})
	}
	for _, b := range h.cdrs {
		key := b.at
		for _, c := range b.cdrs {
			if t, ok := last[c.LinkedID]; ok && t.After(key) {
				key = t
			}
		}
		out = append(out, heldItem{key: key, cdrs: b.cdrs})
	}
	// Stable: events in the order derived, before CDRs of the same key.
	slices.SortStableFunc(out, func(a, b heldItem) int { return a.key.Compare(b.key) })
	return out
}
