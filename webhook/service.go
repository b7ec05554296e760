package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

// State is where the events come from: the engine (*calls.Engine).
type State interface {
	Snapshot() *calls.Snapshot
	Feed() *calls.Feed
}

// Options configures a Service. Dir is required.
type Options struct {
	// Dir holds one queue directory per webhook (<data-dir>/webhooks).
	Dir string
	// Lookup names a number from the phonebook without blocking (the
	// ringing event's "phonebook"). Optional.
	Lookup func(number string) string
	// MaxMemory bounds the events of one webhook waiting in memory for
	// the disk queue's fsync. Default 10000; beyond it events are dropped.
	MaxMemory int
	// Log receives outages and drops, rate-limited. Default: discard.
	Log *slog.Logger
	// Sending, when set, says whether this node sends the default PBX's
	// events (on the bus: while it leads the PBX, so that one node of
	// several sends each event; PBX.Sending a named PBX's). While it says
	// false the PBX's feed reader still follows the calls, so a node that
	// takes the lead goes on with the calls it knows, and the call events
	// it derives and the recorder's CDRs of the PBX are held for CDRHold,
	// then dropped: those of the last CDRHold are queued once it says
	// true, before what follows (a takeover's; the old leader may have
	// sent some: their ids repeat). hold.go has the bound. Safe from any
	// goroutine.
	Sending func() bool
	// CDRHold is how long call events and CDRs are held while not
	// Sending. Default 30s.
	CDRHold time.Duration
	// PBXs are the named PBXs when several are followed in one process
	// (docs/operations.md "Several PBXs"): their engines' call events
	// carry "pbx" and their ids qualified ("site2:201"), as the combined
	// state shows them; New's state is the default PBX's.
	PBXs []PBX
	// Drain are queue directories of an earlier layout (on the bus, a
	// service a PBX: <data-dir>/webhooks-<pbx>): New moves what each
	// webhook's queue there holds into its queue in Dir, then removes it
	// (upgrade.go). Optional.
	Drain []string
}

// PBX is a named PBX's engine (its own ids, not the combined state's).
type PBX struct {
	Name  string
	State State
	// Sending says whether this node sends this PBX's events, as
	// Options.Sending the default PBX's (on the bus: while it leads this
	// PBX). nil: always.
	Sending func() bool
}

// Stats counts what one webhook did.
type Stats struct {
	Name      string
	Delivered uint64 // events the receiver took (2xx)
	Failed    uint64 // attempts that failed (transport error, timeout, 5xx, 408, 429), each retried
	Dropped   uint64 // events lost: queue full, disk error, refused by the receiver (other 4xx)
	Queued    int64  // events waiting, in memory and on disk
}

// Service sends the call events of the engine's feed and the recorder's
// CDRs to the configured webhooks.
type Service struct {
	// Immutable after New.
	state State
	hooks []*hook
	opts  Options
	log   *slog.Logger

	readers []*reader // the default PBX's first, then Options.PBXs'

	started chan struct{} // closed once every reader has taken its snapshot
	running atomic.Bool
	feedBad atomic.Uint64 // changes that could not be decoded
	resyncs atomic.Uint64 // gaps in a feed, closed from a snapshot
	// generations are the feed's jumps to a new generation, replayed
	generations atomic.Uint64
	// heldDropped are the call events a hold dropped, over holdMaxEvents
	heldDropped atomic.Uint64
	stopOnce    sync.Once
}

// reader follows one PBX's engine: its feed and the tracker of its calls.
type reader struct {
	pbx     string // "" for the default PBX
	state   State
	sends   func() bool   // Options.Sending, PBX.Sending; nil: always
	emit    func(*Event)  // Service.eventOf: emitted while sending, else held
	seeded  chan struct{} // closed once the snapshot is taken
	readSeq atomic.Uint64 // last seq handled (tests)
	held    hold          // the PBX's call events and CDRs while not sending (hold.go)

	// Owned by the reader's goroutine.
	tr   *tracker
	last uint64 // last feed seq read
}

// New checks cfgs (Check) and opens every webhook's queue, resuming what
// a previous process left in it.
func New(state State, cfgs []Config, opts Options) (*Service, error) {
	if opts.Dir == "" {
		return nil, errors.New("webhook: no queue directory")
	}
	if err := Check(cfgs); err != nil {
		return nil, err
	}
	if opts.MaxMemory <= 0 {
		opts.MaxMemory = 10000
	}
	if opts.CDRHold <= 0 {
		opts.CDRHold = 30 * time.Second
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{state: state, opts: opts, log: log.With("component", "webhook"), started: make(chan struct{})}
	for _, c := range cfgs {
		if c.RetryMax <= 0 {
			c.RetryMax = 30 * time.Second
		}
		if c.MaxQueue <= 0 {
			c.MaxQueue = 64 << 20
		}
		h, err := newHook(c, opts.Dir, opts.MaxMemory, s.log)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.hooks = append(s.hooks, h)
	}
	s.addReader(PBX{State: state, Sending: opts.Sending})
	for _, p := range opts.PBXs {
		if err := calls.CheckPBXName(p.Name); err != nil || p.State == nil || slices.ContainsFunc(s.readers, func(r *reader) bool { return r.pbx == p.Name }) {
			s.Close()
			return nil, fmt.Errorf("webhook: PBX %q: a PBX name, once, and its engine", p.Name)
		}
		s.addReader(p)
	}
	for _, dir := range opts.Drain {
		for _, h := range s.hooks {
			if err := h.drainOld(dir); err != nil {
				s.log.Error("webhook: a queue of an earlier version not moved: its events wait for the next start", "dir", dir, "err", err)
			}
		}
	}
	return s, nil
}

func (s *Service) addReader(p PBX) {
	scope := s.inScope
	if p.Name != "" {
		scope = func(exten string) bool { return s.inScope(calls.QualifyID(p.Name, exten)) }
	}
	r := &reader{pbx: p.Name, state: p.State, sends: p.Sending, seeded: make(chan struct{}), tr: newTracker(p.Name, s.opts.Lookup, scope)}
	r.emit = func(e *Event) { s.eventOf(r, e) }
	s.readers = append(s.readers, r)
}

// sending reports whether this node sends r's PBX's events now.
func (r *reader) sending() bool { return r.sends == nil || r.sends() }

// known reports whether name is one of Options.PBXs'.
func (s *Service) known(name string) bool {
	for _, r := range s.readers[1:] {
		if r.pbx == name {
			return true
		}
	}
	return false
}

// inScope reports whether some webhook wants call events of exten.
func (s *Service) inScope(exten string) bool {
	for _, h := range s.hooks {
		if h.wantsExten(exten) && (h.wantsType(TypeRinging) || h.wantsType(TypeAnswered) || h.wantsType(TypeHangup)) {
			return true
		}
	}
	return false
}

// Run reads the feed and delivers until ctx ends; then it stops reading,
// writes what is queued in memory to the disk queues, lets a POST under
// way finish, and returns. What is left is sent by the next process. It
// closes the queues: a Service runs once.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("webhook: Run called twice")
	}
	defer s.Close()
	var senders, writers sync.WaitGroup
	wctx, stopWriters := context.WithCancel(context.Background())
	for _, h := range s.hooks {
		senders.Go(func() { h.sender(ctx) })
		writers.Go(func() { h.writer(wctx) })
	}
	var readers sync.WaitGroup
	for _, r := range s.readers {
		readers.Go(func() { s.read(ctx, r) })
	}
	go func() {
		for _, r := range s.readers {
			<-r.seeded
		}
		close(s.started)
	}()
	readers.Wait()
	// The feed readers and the recorder (stopped before ctx ends) add no
	// more: flush the memory queues.
	stopWriters()
	writers.Wait()
	senders.Wait()
	return nil
}

// read follows r's feed until ctx ends. It never waits on anything but
// the feed: events go to the webhooks' memory queues, which drop when
// full.
func (s *Service) read(ctx context.Context, r *reader) {
	feed := r.state.Feed()
	snap := r.state.Snapshot()
	r.tr.seed(snap)
	r.last = snap.Seq
	close(r.seeded)
	for {
		wake := feed.Wait() // before reading, so no append is missed
		s.pump(r, feed)
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// pump handles the changes after r.last. When the feed jumped past
// them to a new generation (a bus rollover's adoption, window.go) it
// applies what it had not read of the one before (calls.Feed.Previous),
// then replays the new one's changes; after another gap it
// resynchronises from the current snapshot.
func (s *Service) pump(r *reader, feed *calls.Feed) {
	cs, ok := feed.Since(r.last)
	if !ok {
		// What the reader had not read of the generation before the
		// jump goes first, as live (a call whose whole life was there).
		if old, ok := feed.Previous(r.last); ok {
			s.apply(r, old)
		}
		if base, gen, ok := feed.Generation(); ok && base > r.last {
			snap := r.state.Snapshot()
			s.generations.Add(1)
			s.log.Info("webhook feed reader replays a new generation of the state", "pbx", r.pbx, "from_seq", r.last, "base", base, "changes", len(gen))
			r.tr.replay(gen, snap, r.emit, func(err error) {
				s.feedBad.Add(1)
				s.log.Error("webhook: undecodable change skipped", "pbx", r.pbx, "err", err)
			})
			r.last = base
			if len(gen) > 0 {
				r.last = gen[len(gen)-1].Seq
			}
			r.readSeq.Store(r.last)
			return
		}
		snap := r.state.Snapshot()
		s.resyncs.Add(1)
		s.log.Warn("webhook feed reader fell behind: resynchronised from a snapshot", "pbx", r.pbx, "from_seq", r.last, "to_seq", snap.Seq)
		r.tr.resync(snap, r.emit)
		r.last = snap.Seq
		r.readSeq.Store(r.last)
		return
	}
	if r.sends != nil && r.sending() {
		s.sendHeld(r) // a takeover's events, as soon as this node sends
	}
	s.apply(r, cs)
	r.readSeq.Store(r.last)
}

// apply hands the changes cs, after r.last, to r's tracker.
func (s *Service) apply(r *reader, cs []calls.Change) {
	for i := range cs {
		if err := r.tr.change(&cs[i], r.emit); err != nil {
			s.feedBad.Add(1)
			s.log.Error("webhook: undecodable change skipped", "pbx", r.pbx, "err", err)
		}
		r.last = cs[i].Seq
	}
}

// emit encodes e once and queues it for every webhook that wants it
// (eventOf and sendHeld, while this node sends the PBX's events).
func (s *Service) emit(e *Event) {
	var r record
	for _, h := range s.hooks {
		if !h.wantsType(e.Type) || !h.wantsExten(e.Extension) {
			continue
		}
		if r.Body == nil {
			b, err := json.Marshal(e)
			if err != nil {
				s.log.Error("webhook: event not encodable", "id", e.ID, "err", err)
				return
			}
			r = record{ID: e.ID, Type: e.Type, Body: b}
		}
		h.enqueue(r)
	}
}

// queueCDRs queues the cdr events of cdrs.
func (s *Service) queueCDRs(cdrs []history.CDR) {
	ms := time.Now().UnixMilli()
	for i := range cdrs {
		c := &cdrs[i]
		var r record
		for _, h := range s.hooks {
			if !h.wantsType(TypeCDR) || !h.wantsCDR(c.Src, c.Dst) {
				continue
			}
			if r.Body == nil {
				pbx, _ := calls.SplitID(c.UniqueID, s.known) // a named PBX's are qualified (cmd/ctibridge qualifyCDRs)
				e := cdrEvent(c, pbx, ms)
				b, err := json.Marshal(&e)
				if err != nil {
					s.log.Error("webhook: cdr not encodable", "id", e.ID, "err", err)
					break
				}
				r = record{ID: e.ID, Type: e.Type, Body: b}
			}
			h.enqueue(r)
		}
	}
}

// Stats returns each webhook's counters, in configuration order. Safe
// from any goroutine.
func (s *Service) Stats() []Stats {
	out := make([]Stats, len(s.hooks))
	for i, h := range s.hooks {
		out[i] = Stats{Name: h.cfg.Name, Delivered: h.delivered.Load(), Failed: h.failed.Load(),
			Dropped: h.dropped.Load(), Queued: h.pending()}
	}
	return out
}

// Close closes the queues and the clients' idle connections; Run does it
// when it returns. Idempotent.
func (s *Service) Close() {
	s.stopOnce.Do(func() {
		for _, h := range s.hooks {
			h.q.Close()
			h.client.Close()
		}
	})
}
