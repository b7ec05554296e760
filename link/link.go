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
	ami.ActionCoreShowChannels,
	ami.ActionExtensionStateList,
	ami.ActionPJSIPShowEndpoints,
	ami.ActionPJSIPShowContacts,
	ami.ActionDeviceStateList,
	ami.ActionQueueStatus,
	ami.ActionParkedCalls,
	ami.ActionConfbridgeListRooms, // locked flags; rooms that ended while down disappear (the per-room ConfbridgeList are follow-ups)
}

// Engine is what the link drives: the engine's mutating methods, all
// called from Run's goroutine. *calls.Engine satisfies it; so does a
// wrapper that records every call for replay on other nodes (package bus).
type Engine interface {
	Apply(m ami.Message)
	Publish() *calls.Snapshot
	SetLink(s calls.LinkState)
	BeginResync()
	EndResync()
	BeginReconcile()
	Reconcile(items []ami.Message) int
	Followups(k calls.FollowupKind) []ami.Message
	ApplyAnswer(action ami.Message, resp ami.Response, err error)
	RefreshDurations() *calls.Snapshot
	Stats() calls.Stats
}

// Link connects a PBX to an engine. Create it with New and start it with Run.
type Link struct {
	// Immutable after New.
	pbx PBX
	eng Engine
	cfg Config
	log *slog.Logger

	ready     atomic.Bool
	stats     atomic.Pointer[Stats]
	resyncs   atomic.Uint64
	failures  atomic.Uint64
	lastSync  atomic.Int64 // duration of the last successful resync, ns
	batchLag  atomic.Int64 // apply+publish time of the last batch, ns
	applyNs   atomic.Int64 // apply time of every batch, ns
	publishNs atomic.Int64 // publish (and follow-up) time of every batch, ns
	batches   atomic.Uint64
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
	ApplyTime      time.Duration // time spent in Apply, every batch so far
	PublishTime    time.Duration // time spent in Publish (and asking for follow-ups), every batch so far
	Batches        uint64        // batches applied and published
	Followups      uint64        // follow-up actions answered (docs/link.md)
}

// New returns a link between pbx and eng. eng must not be used by anyone
// else while Run runs, except through its goroutine-safe readers.
func New(pbx PBX, eng Engine, cfg Config) *Link {
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
	s.ApplyTime, s.PublishTime = time.Duration(l.applyNs.Load()), time.Duration(l.publishNs.Load())
	s.Batches = l.batches.Load()
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
