package sqldb

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// GateConfig configures a Gate. Prepare is required.
type GateConfig struct {
	// Prepare readies the database: connects and applies the
	// migrations. Run calls it, with backoff, until it succeeds once.
	Prepare func(ctx context.Context) error
	// OnReady, when set, runs once right after Prepare first succeeds
	// (to load what is cached from the database), on Run's goroutine.
	OnReady func(ctx context.Context)
	// CheckEvery is the period of the health check once prepared.
	// Default 5 s.
	CheckEvery time.Duration
	// RetryMax is the longest pause between failed attempts (backoff
	// from 250 ms, doubling, with jitter). Default 10 s.
	RetryMax time.Duration
	// Log receives the outages, rate-limited (see Outage). Default:
	// discard.
	Log *slog.Logger
}

// Gate lets a process start and serve without its database: the Conn it
// gives out answers ErrUnavailable until Run has reached the database
// and prepared it, and passes everything through afterwards, except
// while the database is known to be down: then it answers
// ErrUnavailable at once (no request waits for a connect timeout) and
// has Run check again, at most every quarter second. Run checks the
// database every CheckEvery, and as soon as a query through the Conn
// finds it unreachable. Safe for concurrent use.
type Gate struct {
	// Immutable after NewGate.
	c   Conn
	cfg GateConfig
	out *Outage

	ready atomic.Bool   // Prepare has succeeded
	up    atomic.Bool   // ready and the last check passed
	kick  chan struct{} // check now (a query found the database down)
}

// minCheck is the shortest time between two checks asked for by kicks.
const minCheck = 250 * time.Millisecond

// NewGate returns a Gate over c; nothing is tried before Run.
func NewGate(c Conn, cfg GateConfig) *Gate {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 5 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{c: c, cfg: cfg, out: NewOutage(log, "database"), kick: make(chan struct{}, 1)}
}

// Conn returns the gated Conn, for the stores.
func (g *Gate) Conn() Conn { return gateConn{g} }

// Ready reports whether the database has been prepared (the stores work
// from then on, failing only while it is unreachable).
func (g *Gate) Ready() bool { return g.ready.Load() }

// Up reports whether the database is prepared and answered its last
// check.
func (g *Gate) Up() bool { return g.up.Load() }

// Run prepares the database, retrying with backoff, then checks it every
// CheckEvery, until ctx ends; it returns ctx's error.
func (g *Gate) Run(ctx context.Context) error {
	b := Backoff{Min: 250 * time.Millisecond, Max: g.cfg.RetryMax}
	for {
		last := time.Now()
		err := g.step(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := g.cfg.CheckEvery
		if err != nil {
			g.up.Store(false)
			g.out.Fail(err)
			wait = b.Next()
		} else {
			g.up.Store(true)
			g.out.OK()
			b.Reset()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-g.kick:
			t.Stop()
			t = time.NewTimer(time.Until(last.Add(minCheck)))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

func (g *Gate) step(ctx context.Context) error {
	if g.ready.Load() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := g.c.Exec(cctx, `SELECT 1`)
		return err
	}
	if err := g.cfg.Prepare(ctx); err != nil {
		return err
	}
	g.up.Store(true)
	g.ready.Store(true)
	if g.cfg.OnReady != nil {
		g.cfg.OnReady(ctx)
	}
	return nil
}

// What the gated Conn answers before the first Prepare, and while the
// database is known to be down.
var (
	errNotReady = &downError{errors.New("not connected and migrated yet")}
	errDown     = &downError{errors.New("it failed its last check; checking again")}
)

// admit says whether a query may go to the database.
func (g *Gate) admit() error {
	switch {
	case !g.ready.Load():
		return errNotReady
	case !g.up.Load():
		g.poke()
		return errDown
	}
	return nil
}

// saw notes a query's error: one that says the database is unreachable
// marks it down, is logged as the outage's start (Run's check, which it
// asks for, may find the database back already: the outage must not go
// unlogged then), and asks Run to check it.
func (g *Gate) saw(err error) error {
	if IsUnavailable(err) {
		g.up.Store(false)
		g.out.Fail(err)
		g.poke()
	}
	return err
}

func (g *Gate) poke() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// gateConn is Gate.Conn.
type gateConn struct{ g *Gate }

func (c gateConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	if err := c.g.admit(); err != nil {
		return 0, err
	}
	n, err := c.g.c.Exec(ctx, q, args...)
	return n, c.g.saw(err)
}

func (c gateConn) Query(ctx context.Context, q string, args ...any) (Rows, func(), error) {
	if err := c.g.admit(); err != nil {
		return nil, nil, err
	}
	rs, done, err := c.g.c.Query(ctx, q, args...)
	return rs, done, c.g.saw(err)
}

func (c gateConn) QueryRow(ctx context.Context, q string, args ...any) func(dest ...any) error {
	if err := c.g.admit(); err != nil {
		return func(...any) error { return err }
	}
	scan := c.g.c.QueryRow(ctx, q, args...)
	return func(dest ...any) error { return c.g.saw(scan(dest...)) }
}

func (c gateConn) InTx(ctx context.Context, fn func(Conn) error) error {
	if err := c.g.admit(); err != nil {
		return err
	}
	return c.g.saw(c.g.c.InTx(ctx, fn))
}

func (c gateConn) Postgres() bool { return c.g.c.Postgres() }

// Backoff is a jittered exponential pause: each Next is drawn from
// [d/2, d], then d doubles up to Max. The zero value is not usable:
// set Min and Max.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the pause before the next attempt.
func (b *Backoff) Next() time.Duration {
	if b.cur < b.Min {
		b.cur = b.Min
	}
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(b.cur*2, b.Max)
	return d
}

// Reset starts again from Min.
func (b *Backoff) Reset() { b.cur = 0 }

// Failing reports whether Next has been called since the last Reset.
func (b *Backoff) Failing() bool { return b.cur != 0 }

// Outage logs the failures of one thing without flooding the log: the
// first failure at once (Warn, with its error), then at most one line a
// minute while it lasts, with the count of failures since the last line,
// and a line when it is over (Info, with how long it lasted and how many
// failures there were). Safe for concurrent use.
type Outage struct {
	log  *slog.Logger
	what string
	now  func() time.Time // time.Now; tests move it

	mu       sync.Mutex // guards below
	since    time.Time  // start of the outage; zero: none
	last     time.Time  // last line logged
	failures int        // in this outage
	unlogged int        // since the last line
}

// outageEvery is the period of the "still failing" line.
const outageEvery = time.Minute

// NewOutage returns an Outage logging about what ("database", "cdr
// store writes").
func NewOutage(log *slog.Logger, what string) *Outage {
	return &Outage{log: log, what: what, now: time.Now}
}

// Fail records a failure.
func (o *Outage) Fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	o.failures++
	if o.since.IsZero() {
		o.since, o.last, o.unlogged = now, now, 0
		o.log.Warn(o.what+" unavailable", "err", err)
		return
	}
	o.unlogged++
	if now.Sub(o.last) >= outageEvery {
		o.log.Warn(o.what+" still unavailable", "failures", o.unlogged, "down_for", now.Sub(o.since).Round(time.Second), "err", err)
		o.last, o.unlogged = now, 0
	}
}

// OK records a success, ending an outage if there was one.
func (o *Outage) OK() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	o.log.Info(o.what+" back", "failures", o.failures, "down_for", o.now().Sub(o.since).Round(time.Millisecond))
	o.since, o.failures, o.unlogged = time.Time{}, 0, 0
}

// Down reports whether an outage is going on.
func (o *Outage) Down() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.since.IsZero()
}
