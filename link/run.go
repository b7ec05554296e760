package link

import (
	"context"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// runner is the state of one Run: everything here is owned by Run's
// goroutine.
type runner struct {
	l       *Link
	ctx     context.Context
	wg      *sync.WaitGroup
	results chan listResult
	fu      *followups

	gen        uint64 // bumped on every LinkUp and LinkDown
	up         bool
	live       bool // a resync completed on this connection and no Shutdown since
	stalled    bool // a keep-alive is late (ami.LinkStalled)
	syncing    bool // a resync is in flight for gen
	reconciler bool // a reconcile is in flight
	restarting bool // Shutdown seen: resync at FullyBooted
	bootSeen   bool // FullyBooted seen on this connection
	again      bool // resync again when the one in flight ends: it may predate FullyBooted
	retry      <-chan time.Time
	lastStats  time.Time
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

	r := &runner{l: l, ctx: ctx, wg: &wg, results: make(chan listResult), fu: l.newFollowups()}
	defer r.fu.stop()
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
			r.batch(evs)
		case res := <-r.results:
			// A batch read before the lists completed goes first: items
			// are safe either way (see calls), but FullyBooted must be
			// seen before the resync that follows the login ends.
			select {
			case evs := <-batches:
				r.batch(evs)
			default:
			}
			r.result(res)
		case b := <-r.fu.done:
			if rw := l.answered(ctx, &wg, r.fu, r.gen, b, r.restarting || r.syncing); rw != nil {
				r.finishResync(rw.lists+time.Since(rw.start), rw.items)
			}
		case acts := <-l.reqs:
			r.fu.requested(acts)
			r.followups(calls.FollowPending)
		case <-r.fu.tick:
			r.followups(calls.FollowRefresh)
		case <-r.retry:
			r.retry = nil
			if r.up && !r.syncing {
				r.start(false)
			}
		case <-durations.C:
			l.eng.RefreshDurations()
		case <-tick:
			if r.up && !r.syncing && !r.reconciler && l.ready.Load() {
				r.start(true)
			}
		}
	}
}

// start begins a resync (or a reconcile) and runs its list actions in the
// background; the outcome comes back on r.results.
func (r *runner) start(reconcile bool) {
	g := r.gen
	if reconcile {
		r.reconciler = true
		r.l.eng.BeginReconcile()
	} else {
		r.syncing = true
		r.l.ready.Store(false)
		r.l.eng.BeginResync()
	}
	r.wg.Go(func() {
		res := r.l.list(r.ctx, reconcile)
		res.gen, res.reconcile = g, reconcile
		select {
		case r.results <- res:
		case <-r.ctx.Done():
		}
	})
}

// batch applies one batch from Next and publishes once.
func (r *runner) batch(evs []ami.Event) {
	l := r.l
	t0 := time.Now()
	for _, ev := range evs {
		if ev.Link != ami.LinkNone {
			r.marker(ev.Link)
			continue
		}
		l.eng.Apply(ev.Msg)
		if l.cfg.OnMessage != nil {
			l.cfg.OnMessage(ev.Msg)
		}
		switch ev.Msg.Event() {
		case ami.EventShutdown:
			// Asterisk is stopping or restarting: what we hold is
			// about to be wrong. Stale until FullyBooted + resync.
			r.restarting, r.live = true, false
			l.ready.Store(false)
			l.eng.SetLink(calls.LinkResyncing)
		case ami.EventFullyBooted:
			// A booted Asterisk sends it right after the login response,
			// before the first resync can end; one still booting when we
			// logged in (the fast reconnect makes that likely) sends it
			// later, and the lists read before may lack what it loads
			// last (queues, hints): read them again.
			late := !r.bootSeen && r.live
			r.bootSeen = true
			if r.up && (r.restarting || late) {
				r.restarting = false
				l.log.Info("pbx fully booted, resynchronising")
				if r.syncing {
					r.again = true
				} else {
					r.start(false)
				}
			}
		}
	}
	t1 := time.Now()
	l.eng.Publish()
	r.followups(calls.FollowPending)
	t2 := time.Now()
	l.batchLag.Store(int64(t2.Sub(t0)))
	l.applyNs.Add(int64(t1.Sub(t0)))
	l.publishNs.Add(int64(t2.Sub(t1)))
	l.batches.Add(1)
	if time.Since(r.lastStats) > time.Second {
		r.engineStats()
	}
}

// engineStats copies the engine's counters for Stats, which may be read
// from any goroutine.
func (r *runner) engineStats() {
	r.lastStats = time.Now()
	s := *r.l.stats.Load()
	s.Engine = r.l.eng.Stats()
	r.l.stats.Store(&s)
}

// marker handles the client's link markers.
func (r *runner) marker(m ami.LinkState) {
	l := r.l
	switch m {
	case ami.LinkUp:
		r.gen++
		r.up, r.live, r.stalled, r.restarting = true, false, false, false
		r.bootSeen, r.again = false, false
		l.log.Info("pbx link up, resynchronising")
		l.eng.SetLink(calls.LinkResyncing)
		r.start(false)
	case ami.LinkDown:
		r.gen++
		r.up, r.live, r.stalled, r.syncing, r.reconciler, r.retry = false, false, false, false, false, nil
		r.again = false
		l.ready.Store(false)
		l.log.Warn("pbx link down")
		l.eng.SetLink(calls.LinkDown)
	case ami.LinkStalled:
		if !r.up || r.stalled {
			return
		}
		r.stalled = true
		l.ready.Store(false)
		l.log.Warn("pbx link stalled: state marked stale")
		l.eng.SetLink(calls.LinkStalled)
	case ami.LinkResumed:
		if !r.up || !r.stalled {
			return
		}
		r.stalled = false
		l.log.Info("pbx link resumed")
		if r.live {
			l.eng.SetLink(calls.LinkLive)
			l.ready.Store(true)
		} else {
			l.eng.SetLink(calls.LinkResyncing)
		}
	}
}

// result handles the outcome of a resync or reconcile.
func (r *runner) result(res listResult) {
	l := r.l
	if res.gen != r.gen {
		return // belongs to a connection that is gone
	}
	if res.reconcile {
		r.reconciler = false
		if res.err != nil {
			l.log.Warn("reconcile failed", "err", res.err)
			return
		}
		if n := l.eng.Reconcile(res.items); n > 0 {
			l.log.Warn("reconcile repaired drift", "repairs", n)
		}
		// Counters first: whoever sees the repaired state sees them.
		r.engineStats()
		l.reconcile.Add(1)
		l.eng.Publish()
		return
	}
	r.syncing = false
	if r.again {
		// FullyBooted came while these lists were read: read them again.
		r.again = false
		r.start(false)
		return
	}
	if res.err != nil {
		l.failures.Add(1)
		l.log.Warn("resync failed, will retry", "err", res.err, "retry_in", l.cfg.RetryDelay)
		r.retry = time.After(l.cfg.RetryDelay)
		return
	}
	for _, m := range res.items {
		l.eng.Apply(m)
	}
	if r.restarting {
		// A Shutdown arrived while the lists were being read: they
		// may describe the PBX before its restart. Stay stale.
		return
	}
	if l.followResync(r.ctx, r.wg, r.fu, r.gen, res) {
		return // EndResync once the follow-ups are answered
	}
	r.finishResync(res.took, len(res.items))
}

// followups sends, in the background, the engine's follow-ups of kind
// while the state is live (docs/link.md).
func (r *runner) followups(kind calls.FollowupKind) {
	if r.up && !r.syncing && r.l.ready.Load() {
		r.l.background(r.ctx, r.wg, r.fu, r.gen, kind)
	}
}

// finishResync ends a resync whose lists and follow-ups are applied.
func (r *runner) finishResync(took time.Duration, items int) {
	l := r.l
	l.eng.EndResync()
	r.live = true
	if r.stalled {
		// The lists came in, but a keep-alive is late now: stay stale
		// until it is answered.
		l.eng.SetLink(calls.LinkStalled)
	}
	r.engineStats()
	l.resyncs.Add(1)
	l.lastSync.Store(int64(took))
	l.eng.Publish()
	l.ready.Store(!r.stalled)
	l.log.Info("pbx state resynchronised", "took", took, "items", items)
}
