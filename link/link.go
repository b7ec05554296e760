// Package link runs the live link between an AMI connection and the call
// engine: it feeds the event stream into a calls.Engine in batches, publishing
// one snapshot per batch; it resynchronises the engine from the PBX's list
// actions on every (re)connect and after an Asterisk restart; and it
// reconciles the engine against CoreShowChannels periodically to repair drift.
//
// calls is pure and ami knows only the protocol; link is the one place where
// the two meet with goroutines and I/O. Link.Run owns every goroutine it
// starts and waits for them before it returns. The engine is only touched
// from Run's goroutine; everything exported besides Run is safe to call from
// any goroutine.
package link

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// PBX is what the link needs from an AMI client; *ami.Client satisfies it.
type PBX interface {
	// Next blocks until events are queued and returns all of them in order.
	Next(ctx context.Context) ([]ami.Event, error)
	// Do sends an action and waits for its (list) response.
	Do(ctx context.Context, action ami.Message) (ami.Response, error)
}

// Config tunes a Link. The zero value uses the defaults.
type Config struct {
	// ResyncTimeout bounds one resynchronisation (all list actions).
	// Default 30s. A failed resync is retried after RetryDelay while the
	// link stays up; the state stays marked stale meanwhile.
	ResyncTimeout time.Duration
	// RetryDelay is the pause before retrying a failed resync. Default 2s.
	RetryDelay time.Duration
	// ReconcileEvery is the period of the drift check against
	// CoreShowChannels. Default 60s; negative disables it.
	ReconcileEvery time.Duration
	// Log receives lifecycle messages. Default: discard.
	Log *slog.Logger
	// RefreshEvery is the period of the engine's FollowRefresh actions
	// (AstDB forwards and DND, which raise no AMI event; new endpoints).
	// Default DefaultRefreshEvery; negative disables it.
	RefreshEvery time.Duration
	// OnMessage, when set, sees every message of the live stream right
	// after the engine applied it, on Run's goroutine: it must not block.
	// The history recorder takes its Cdr events (and the channel events
	// that give them their linkedid) from here.
	OnMessage func(ami.Message)
}

// resyncActions are the list actions that rebuild the engine's state, in the
// order they are sent (they are pipelined, so order only matters for logs).
// An action the PBX refuses (a module not loaded) is skipped, not fatal.
var resyncActions = []string{
	"CoreShowChannels",
	"ExtensionStateList",
	"PJSIPShowEndpoints",
	"PJSIPShowContacts",
	"DeviceStateList",
	"QueueStatus",
	"ParkedCalls",
	"ConfbridgeListRooms", // locked flags; rooms that ended while down disappear (the per-room ConfbridgeList are follow-ups)
}

// Link connects a PBX to an engine. Create it with New and start it with Run.
type Link struct {
	// Immutable after New.
	pbx PBX
	eng *calls.Engine
	cfg Config
	log *slog.Logger

	ready     atomic.Bool
	stats     atomic.Pointer[Stats]
	resyncs   atomic.Uint64
	failures  atomic.Uint64
	lastSync  atomic.Int64 // duration of the last successful resync, ns
	batchLag  atomic.Int64 // apply+publish time of the last batch, ns
	reconcile atomic.Uint64
	followed  atomic.Uint64      // follow-up actions answered
	reqs      chan []ami.Message // Refresh -> Run
}

// Stats is what Link reports for metrics.
type Stats struct {
	Engine         calls.Stats
	Ready          bool
	Resyncs        uint64        // completed resynchronisations
	ResyncFailures uint64        // resyncs abandoned (timeout, link lost)
	LastResync     time.Duration // how long the last resync took
	Reconciles     uint64        // drift checks run
	BatchLag       time.Duration // apply + publish time of the last batch
	Followups      uint64        // follow-up actions answered (docs/link.md)
}

// New returns a link between pbx and eng. eng must not be used by anyone
// else while Run runs, except through its goroutine-safe readers.
func New(pbx PBX, eng *calls.Engine, cfg Config) *Link {
	if cfg.ResyncTimeout <= 0 {
		cfg.ResyncTimeout = 30 * time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 2 * time.Second
	}
	if cfg.ReconcileEvery == 0 {
		cfg.ReconcileEvery = 60 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	l := &Link{pbx: pbx, eng: eng, cfg: cfg, log: cfg.Log, reqs: make(chan []ami.Message, 64)}
	l.stats.Store(&Stats{})
	return l
}

// Ready reports whether the PBX link is up and the state resynchronised:
// what /readyz answers.
func (l *Link) Ready() bool { return l.ready.Load() }

// Stats returns the latest counters. Engine counters are refreshed at most
// once a second, from Run's goroutine.
func (l *Link) Stats() Stats {
	s := *l.stats.Load()
	s.Ready = l.ready.Load()
	s.Resyncs = l.resyncs.Load()
	s.ResyncFailures = l.failures.Load()
	s.LastResync = time.Duration(l.lastSync.Load())
	s.Reconciles = l.reconcile.Load()
	s.BatchLag = time.Duration(l.batchLag.Load())
	s.Followups = l.followed.Load()
	return s
}

// listResult is the outcome of a resync or reconcile run in the background.
type listResult struct {
	gen       uint64 // connection generation it belongs to
	reconcile bool
	items     []ami.Message
	err       error
	took      time.Duration
}

// Run drives the engine until ctx is done. It returns ctx's error, or the
// PBX's error if Next fails for another reason.
func (l *Link) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	batches := make(chan []ami.Event)
	nextErr := make(chan error, 1)
	wg.Go(func() {
		for {
			evs, err := l.pbx.Next(ctx)
			if err != nil {
				nextErr <- err
				return
			}
			select {
			case batches <- evs:
			case <-ctx.Done():
				return
			}
		}
	})

	results := make(chan listResult)
	var (
		gen        uint64 // bumped on every LinkUp and LinkDown
		up         bool
		syncing    bool // a resync is in flight for gen
		reconciler bool // a reconcile is in flight
		restarting bool // Shutdown seen: resync at FullyBooted
		retry      <-chan time.Time
		lastStats  time.Time
	)
	start := func(reconcile bool) {
		g := gen
		if reconcile {
			reconciler = true
			l.eng.BeginReconcile()
		} else {
			syncing = true
			l.ready.Store(false)
			l.eng.BeginResync()
		}
		wg.Go(func() {
			r := l.list(ctx, reconcile)
			r.gen = g
			select {
			case results <- r:
			case <-ctx.Done():
			}
		})
	}
	fu := l.newFollowups()
	defer fu.stop()
	// Talk times: the engine re-encodes answered calls' durations at most
	// once a second (calls.Engine.RefreshDurations).
	durations := time.NewTicker(time.Second)
	defer durations.Stop()
	var tick <-chan time.Time
	if l.cfg.ReconcileEvery > 0 {
		t := time.NewTicker(l.cfg.ReconcileEvery)
		defer t.Stop()
		tick = t.C
	}

	for {
		select {
		case <-ctx.Done():
			l.ready.Store(false)
			return ctx.Err()
		case err := <-nextErr:
			l.ready.Store(false)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case evs := <-batches:
			t0 := time.Now()
			for _, ev := range evs {
				switch ev.Link {
				case ami.LinkUp:
					gen++
					up, restarting = true, false
					l.log.Info("pbx link up, resynchronising")
					l.eng.SetLink(calls.LinkResyncing)
					start(false)
					continue
				case ami.LinkDown:
					gen++
					up, syncing, reconciler, retry = false, false, false, nil
					l.ready.Store(false)
					l.log.Warn("pbx link down")
					l.eng.SetLink(calls.LinkDown)
					continue
				}
				l.eng.Apply(ev.Msg)
				if l.cfg.OnMessage != nil {
					l.cfg.OnMessage(ev.Msg)
				}
				switch ev.Msg.Event() {
				case "Shutdown":
					// Asterisk is stopping or restarting: what we hold is
					// about to be wrong. Stale until FullyBooted + resync.
					restarting = true
					l.ready.Store(false)
					l.eng.SetLink(calls.LinkResyncing)
				case "FullyBooted":
					if restarting && up {
						restarting = false
						l.log.Info("pbx restarted, resynchronising")
						start(false)
					}
				}
			}
			l.eng.Publish()
			if up && !syncing && l.ready.Load() {
				l.background(ctx, &wg, fu, gen, calls.FollowPending)
			}
			l.batchLag.Store(int64(time.Since(t0)))
			if time.Since(lastStats) > time.Second {
				lastStats = time.Now()
				s := *l.stats.Load()
				s.Engine = l.eng.Stats()
				l.stats.Store(&s)
			}
		case r := <-results:
			if r.gen != gen {
				continue // belongs to a connection that is gone
			}
			if r.reconcile {
				reconciler = false
				if r.err != nil {
					l.log.Warn("reconcile failed", "err", r.err)
					continue
				}
				l.reconcile.Add(1)
				if n := l.eng.Reconcile(r.items); n > 0 {
					l.log.Warn("reconcile repaired drift", "repairs", n)
				}
				l.eng.Publish()
				continue
			}
			syncing = false
			if r.err != nil {
				l.failures.Add(1)
				l.log.Warn("resync failed, will retry", "err", r.err, "retry_in", l.cfg.RetryDelay)
				retry = time.After(l.cfg.RetryDelay)
				continue
			}
			for _, m := range r.items {
				l.eng.Apply(m)
			}
			if restarting {
				// A Shutdown arrived while the lists were being read: they
				// may describe the PBX before its restart. Stay stale.
				continue
			}
			if l.followResync(ctx, &wg, fu, gen, r) {
				continue // EndResync once the follow-ups are answered
			}
			l.finishResync(r.took, len(r.items))
		case b := <-fu.done:
			if rw := l.answered(ctx, &wg, fu, gen, b, restarting || syncing); rw != nil {
				l.finishResync(rw.lists+time.Since(rw.start), rw.items)
			}
		case acts := <-l.reqs:
			fu.requested(acts)
			if up && !syncing && l.ready.Load() {
				l.background(ctx, &wg, fu, gen, calls.FollowPending)
			}
		case <-fu.tick:
			if up && !syncing && l.ready.Load() {
				l.background(ctx, &wg, fu, gen, calls.FollowRefresh)
			}
		case <-retry:
			retry = nil
			if up && !syncing {
				start(false)
			}
		case <-durations.C:
			l.eng.RefreshDurations()
		case <-tick:
			if up && !syncing && !reconciler && l.ready.Load() {
				start(true)
			}
		}
	}
}

// list runs the resync list actions (or only CoreShowChannels for a
// reconcile), pipelined, and returns every list item in a stable order.
func (l *Link) list(ctx context.Context, reconcile bool) listResult {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ResyncTimeout)
	defer cancel()
	actions := resyncActions
	if reconcile {
		actions = resyncActions[:1]
	}
	resps := make([]ami.Response, len(actions))
	errs := make([]error, len(actions))
	var wg sync.WaitGroup
	for i, name := range actions {
		wg.Go(func() {
			resps[i], errs[i] = l.pbx.Do(ctx, ami.NewAction(name))
		})
	}
	wg.Wait()
	var r listResult
	for i, err := range errs {
		var ae *ami.ActionError
		switch {
		case err == nil:
			r.items = append(r.items, resps[i].Items...)
		case errors.As(err, &ae):
			// The PBX does not offer this list (module not loaded, or an
			// older Asterisk): the engine just learns less.
			l.log.Debug("list action refused", "action", actions[i], "err", err)
		default:
			r.err = err
			return r
		}
	}
	r.took = time.Since(t0)
	return r
}
