package webhook

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

// cdrHold keeps a PBX's CDRs taken while this node does not send its
// events (Options.Sending, PBX.Sending), oldest first.
//
// A takeover sends all those of the last CDRHold, though the old sender
// may have sent some (their ids repeat): nothing tells this node which.
// Each bridge's recorder hears every Cdr on its own AMI session, not
// through the op log; the old sender's queue and its receivers' 2xx are
// on its own disk; and a sender that died loses what it had taken but
// not yet written to its disk queue. What it did not send is known to
// no one else, so the hold covers the whole takeover: the lease's
// expiry, the catch-up, the new link's resync, with room for a loaded
// machine. Sending only what the old sender did not confirm would need
// it to publish its confirmations (on the bus, beside the op log).
type cdrHold struct {
	mu   sync.Mutex
	held []heldCDRs
	// holding is len(held) > 0, set and cleared under mu: sendHeld, on
	// every feed wake while sending, reads it instead of taking mu.
	holding atomic.Bool
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
		s.hold(r, cdrs)
		return
	}
	s.sendHeld(r)
	s.queueCDRs(cdrs)
}

// hold keeps cdrs of r's PBX for CDRHold, dropping what is older.
func (s *Service) hold(r *reader, cdrs []history.CDR) {
	now := time.Now()
	h := &r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for i < len(h.held) && now.Sub(h.held[i].at) > s.opts.CDRHold {
		i++
	}
	h.held = append(h.held[i:], heldCDRs{at: now, cdrs: slices.Clone(cdrs)})
	h.holding.Store(true)
}

// sendHeld queues the CDRs of r's PBX held in the last CDRHold, once
// sending. Nearly always none are: then it takes no lock. A hold that
// returned before it is called is seen (holding is stored after the
// append).
func (s *Service) sendHeld(r *reader) {
	h := &r.held
	if !h.holding.Load() {
		return
	}
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.holding.Store(false)
	h.mu.Unlock()
	for _, b := range held {
		if time.Since(b.at) <= s.opts.CDRHold {
			s.queueCDRs(b.cdrs)
		}
	}
}
