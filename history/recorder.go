package history

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// RecorderConfig configures a Recorder. SpoolDir is required.
type RecorderConfig struct {
	// SpoolDir holds the spool used while the database is down
	// (<data-dir>/spool).
	SpoolDir string
	// MaxSpool bounds the spool, in bytes. Default 256 MiB (about 500,000
	// CDRs). Beyond it new CDRs are dropped, counted and logged.
	MaxSpool int64
	// Batch is the most CDRs per database write. Default 500.
	Batch int
	// FlushEvery is the longest a CDR waits for its batch. Default 200 ms.
	FlushEvery time.Duration
	// WriteTimeout bounds one database write. Default 10 s.
	WriteTimeout time.Duration
	// RetryMax is the longest pause between attempts while the database
	// is down (backoff from 250 ms, with jitter). Default 10 s.
	RetryMax time.Duration
	// Location is the PBX's time zone, for StartTime. Default time.Local.
	Location *time.Location
	// Log receives outages and drops. Default: discard.
	Log *slog.Logger
}

// RecorderStats counts what the recorder did.
type RecorderStats struct {
	Seen    uint64 // Cdr events observed
	Written uint64 // CDRs handed to the database (duplicates included)
	Spooled uint64 // CDRs that went through the spool
	Dropped uint64 // CDRs lost: spool full
	Pending int64  // bytes in the spool now
}

// Recorder writes CDRs from AMI Cdr events. Feed it every AMI message
// with Observe (from the goroutine that reads the PBX) and run Run.
type Recorder struct {
	// Immutable after NewRecorder.
	store Store
	cfg   RecorderConfig
	log   *slog.Logger
	sp    *spool
	in    chan CDR

	mu     sync.Mutex // guards linked
	linked map[string]linkedAt

	seen, written, spooled, dropped atomic.Uint64
}

type linkedAt struct {
	linkedid string
	at       time.Time
}

// NewRecorder opens (or reopens, resuming it) the spool in cfg.SpoolDir.
func NewRecorder(store Store, cfg RecorderConfig) (*Recorder, error) {
	if cfg.SpoolDir == "" {
		return nil, errors.New("history: recorder: SpoolDir is required")
	}
	if cfg.MaxSpool <= 0 {
		cfg.MaxSpool = 256 << 20
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sp, err := openSpool(cfg.SpoolDir, cfg.MaxSpool)
	if err != nil {
		return nil, err
	}
	return &Recorder{store: store, cfg: cfg, log: log.With("component", "history"), sp: sp,
		in: make(chan CDR, 4096), linked: map[string]linkedAt{}}, nil
}

// Observe takes one AMI message. It remembers channels' linkedids (for
// Cdr events without a LinkedID field) and queues Cdr events. It never
// blocks on the database: when the queue is full the CDR goes straight to
// the spool. Safe from any goroutine.
func (r *Recorder) Observe(m ami.Message) {
	if m.Kind() != ami.KindEvent {
		return
	}
	if m.Event() != "Cdr" {
		if u, l := m.Get("Uniqueid"), m.Get("Linkedid"); u != "" && l != "" {
			r.mu.Lock()
			if old, ok := r.linked[u]; !ok || old.linkedid != l {
				r.linked[u] = linkedAt{l, time.Now()}
			}
			r.mu.Unlock()
		}
		return
	}
	c, ok := FromEvent(m, r.cfg.Location, r.linkedID)
	if !ok {
		return
	}
	r.seen.Add(1)
	select {
	case r.in <- c:
	default:
		r.spool([]CDR{c})
	}
}

func (r *Recorder) linkedID(uniqueid string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.linked[uniqueid].linkedid
}

// sweep forgets channels seen more than two hours ago.
func (r *Recorder) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, l := range r.linked {
		if now.Sub(l.at) > 2*time.Hour {
			delete(r.linked, u)
		}
	}
}

func (r *Recorder) spool(cdrs []CDR) {
	if err := r.sp.append(cdrs); err != nil {
		r.dropped.Add(uint64(len(cdrs)))
		r.log.Error("cdrs dropped", "count", len(cdrs), "err", err)
		return
	}
	r.spooled.Add(uint64(len(cdrs)))
}

// Stats returns the counters. Safe from any goroutine.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{Seen: r.seen.Load(), Written: r.written.Load(), Spooled: r.spooled.Load(),
		Dropped: r.dropped.Load(), Pending: r.sp.bytes()}
}

// Run writes queued CDRs in batches until ctx ends, then writes what is
// queued (to the database, else the spool) and returns. While the
// database fails, batches go to the spool (behind what is already there,
// so order is kept) and the spool is retried with backoff.
func (r *Recorder) Run(ctx context.Context) error {
	defer r.sp.close()
	tick := time.NewTicker(r.cfg.FlushEvery)
	defer tick.Stop()
	sweep := time.NewTicker(10 * time.Minute)
	defer sweep.Stop()
	var batch []CDR
	retry := time.Time{} // when to try the spool again; zero: now
	backoff := 250 * time.Millisecond
	flush := func(final bool) {
		if len(batch) > 0 {
			if r.sp.pending() || !r.write(batch) {
				r.spool(batch)
			}
			batch = batch[:0]
		}
		if !r.sp.pending() || (!final && time.Now().Before(retry)) {
			return
		}
		if err := r.sp.drain(r.cfg.Batch, func(cdrs []CDR) error {
			if !r.write(cdrs) {
				return errDown
			}
			return nil
		}); err != nil {
			if backoff == 250*time.Millisecond || final {
				r.log.Warn("cdr database unavailable, spooling", "pending_bytes", r.sp.bytes())
			}
			d := backoff/2 + rand.N(backoff/2+1)
			retry = time.Now().Add(d)
			backoff = min(backoff*2, r.cfg.RetryMax)
			return
		}
		if backoff > 250*time.Millisecond {
			r.log.Info("cdr spool written, database back")
		}
		backoff = 250 * time.Millisecond
	}
	for {
		select {
		case c := <-r.in:
			batch = append(batch, c)
			if len(batch) >= r.cfg.Batch {
				flush(false)
			}
		case <-tick.C:
			flush(false)
		case now := <-sweep.C:
			r.sweep(now)
		case <-ctx.Done():
			for {
				select {
				case c := <-r.in:
					batch = append(batch, c)
					continue
				default:
				}
				break
			}
			flush(true)
			return ctx.Err()
		}
	}
}

var errDown = errors.New("history: database unavailable")

// write tries one batch; false means it failed and must be spooled.
func (r *Recorder) write(cdrs []CDR) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.WriteTimeout)
	defer cancel()
	if err := r.store.Insert(ctx, cdrs); err != nil {
		return false
	}
	r.written.Add(uint64(len(cdrs)))
	return true
}
