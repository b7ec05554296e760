package loadtest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/dbtest/pgcluster"
	"github.com/ctibridge/ctibridge/sipp"
)

// dbRun is the state of the db scenario.
type dbRun struct {
	cfg   ChaosConfig
	pg    *pgcluster.Cluster
	proxy *amiProxy
	serve *serveProc

	wit *cdrWitness

	mu    sync.Mutex // guards the fields below
	kills []time.Time
	dbUp  time.Time // when the database was started again
}

// runChaosDB starts serve on a PostgreSQL that is down, starts the
// database after DBDown, kills serve with -9 at random instants while
// SIPp places calls, then counts the CDRs in the database against the
// Cdr events pbxsim emitted and the proxy handed to a bridge.
func runChaosDB(ctx context.Context, cfg ChaosConfig, dir string, rng *rand.Rand, rep *ChaosReport) error {
	pg, err := pgcluster.Start(pgcluster.Config{Prefix: "ctibridge-chaos-pg-"})
	if err != nil {
		return err
	}
	defer pg.Remove()
	defer pg.Stop()
	if err := pg.Stop(); err != nil {
		return err
	}
	ctx, sc, err := newChaosScene(ctx, cfg)
	if err != nil {
		return err
	}
	defer sc.close()
	pbx := sc.pbx
	r := &dbRun{cfg: cfg, pg: pg, wit: newCDRWitness()}
	if r.proxy, err = newAMIProxy(pbx.pbx.AMIAddr()); err != nil {
		return err
	}
	sc.wg.Go(func() { r.proxy.Run(ctx) })
	if err := r.wit.start(ctx, &sc.wg, pbx.pbx.AMIAddr()); err != nil {
		return err
	}
	if r.serve, err = newServeProc(cfg, dir, r.proxy.Addr(), "--db", pg.DSN()); err != nil {
		return err
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	serveDone := make(chan struct{})
	serveStart := time.Now()
	go func() { defer close(serveDone); r.serve.run(serveCtx) }()
	defer func() { stopServe(); <-serveDone }()

	// The calls start once serve is connected to the manager port (at
	// most 3 s or the outage: today's serve never is while the database
	// is down), so that a serve that runs without its database is handed
	// every Cdr.
	for start := time.Now(); r.proxy.Accepted() == 0 && time.Since(start) < min(3*time.Second, cfg.DBDown); {
		sleepCtx(ctx, 20*time.Millisecond)
	}
	var res sipp.Result
	var callErr error
	callsDone := make(chan struct{})
	callsEnd := time.Now().Add(cfg.DBDuration)
	go func() {
		defer close(callsDone)
		res, callErr = pbx.calls(ctx, cfg, cfg.DBDuration)
	}()
	readyDown := r.outage(ctx, serveStart)
	r.killLoop(ctx, rng, callsDone, callsEnd)
	<-callsDone
	if callErr != nil {
		return callErr
	}
	// Let the last records reach the database, then stop serve cleanly
	// (it flushes on SIGTERM) and count.
	r.serve.waitReady(ctx, 30*time.Second)
	waitCDRsStored(ctx, r.pg.DSN())
	stopServe()
	<-serveDone
	return r.finish(ctx, rep, res, readyDown)
}

// outage keeps the database down for DBDown after serve's first start
// and returns how long serve took to be ready meanwhile (-1: it was not).
func (r *dbRun) outage(ctx context.Context, start time.Time) time.Duration {
	ready := time.Duration(-1)
	for time.Since(start) < r.cfg.DBDown && ctx.Err() == nil {
		if ready < 0 && r.serve.ready(ctx) {
			ready = time.Since(start)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if err := r.pg.Start(); err != nil {
		r.cfg.Log.Error("chaos: cannot restart PostgreSQL", "err", err)
	}
	r.mu.Lock()
	r.dbUp = time.Now()
	r.mu.Unlock()
	return ready
}

// killLoop kills serve with -9 at random instants until the calls end
// (due at callsEnd). The first kill always lands while calls are placed:
// it starts after the outage, and a random wait longer than the calls
// have left would make a run with no kill at all (seen in CI with a 5 s
// run, a 3 s outage and a 2 s mean wait).
func (r *dbRun) killLoop(ctx context.Context, rng *rand.Rand, callsDone <-chan struct{}, callsEnd time.Time) {
	for {
		wait := time.Duration(float64(r.cfg.KillEvery) * (0.5 + rng.Float64()))
		if left := time.Until(callsEnd); len(r.kills) == 0 && wait > left/2 {
			wait = max(left/2, 0)
		}
		select {
		case <-ctx.Done():
			return
		case <-callsDone:
			return
		case <-time.After(wait):
		}
		// Between a death and the restart there is nothing to kill: the
		// kill waits for the next serve.
		for !r.serve.kill9() {
			select {
			case <-ctx.Done():
				return
			case <-callsDone:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		r.mu.Lock()
		r.kills = append(r.kills, time.Now())
		r.mu.Unlock()
		r.cfg.Log.Info("chaos: kill -9 serve")
	}
}

// cdrWitness counts every Cdr event pbxsim emits, on its own manager
// connection, whether or not a bridge is connected.
type cdrWitness struct {
	up      atomic.Bool
	mu      sync.Mutex
	emitted map[string]time.Time // uniqueid -> when it was read
}

func newCDRWitness() *cdrWitness { return &cdrWitness{emitted: map[string]time.Time{}} }

// start runs the witness in wg until ctx ends and waits until it has
// logged in (at most 10 s).
func (w *cdrWitness) start(ctx context.Context, wg *sync.WaitGroup, addr string) error {
	wg.Go(func() { w.run(ctx, addr) })
	for start := time.Now(); !w.up.Load(); {
		if time.Since(start) > 10*time.Second || ctx.Err() != nil {
			return fmt.Errorf("cannot log in to pbxsim's manager port")
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return nil
}

func (w *cdrWitness) run(ctx context.Context, addr string) {
	c := ami.NewClient(ami.Config{Addr: addr, Username: "ctibridge", Secret: "ctibridge", PingInterval: -1})
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { <-done }()
	for {
		evs, err := c.Next(ctx)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if ev.Link == ami.LinkUp {
				w.up.Store(true)
			}
			if ev.Msg.Event() == ami.EventCdr {
				w.mu.Lock()
				w.emitted[ev.Msg.Get("UniqueID")] = time.Now()
				w.mu.Unlock()
			}
		}
	}
}

// snapshot is a copy of the Cdrs seen so far.
func (w *cdrWitness) snapshot() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.emitted)
}

// waitCDRsStored waits until the number of CDRs in the database at dsn
// has not changed for 2 s (at most 30 s).
func waitCDRsStored(ctx context.Context, dsn string) {
	last, since := -1, time.Now()
	for start := time.Now(); time.Since(start) < 30*time.Second && ctx.Err() == nil; {
		rows, err := cdrRows(ctx, dsn)
		if err == nil && len(rows) != last {
			last, since = len(rows), time.Now()
		}
		if err == nil && time.Since(since) >= 2*time.Second {
			return
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

// finish classifies every Cdr pbxsim emitted (handed to a bridge, in
// flight at a kill, or emitted while no bridge was connected) and
// compares with the rows in the database.
func (r *dbRun) finish(ctx context.Context, rep *ChaosReport, res sipp.Result, readyDown time.Duration) error {
	const sc = "db"
	rows, err := cdrRows(ctx, r.pg.DSN())
	if err != nil {
		rep.note("db: cannot read the cdr table: %v", err)
		rows = map[string]int{}
	}
	emitted := r.wit.snapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]time.Time{}
	for _, c := range r.proxy.cdrsSeen() {
		if _, ok := seen[c.uniqueid]; !ok {
			seen[c.uniqueid] = c.at
		}
	}
	var delivered, inFlight, undelivered, undeliveredDown, lost int
	for id, at := range emitted {
		fwd, ok := seen[id]
		switch {
		case !ok:
			undelivered++
			if r.dbUp.IsZero() || at.Before(r.dbUp) {
				undeliveredDown++
			}
		case r.nearKill(fwd):
			inFlight++
		default:
			delivered++
			if rows[id] == 0 {
				lost++
			}
		}
	}
	doubled, stored := 0, 0
	for _, n := range rows {
		stored += n
		if n > 1 {
			doubled++
		}
	}
	readyV := "ready after " + fmtDur(readyDown)
	starts, exits := r.serve.stats()
	if readyDown < 0 {
		readyV = fmt.Sprintf("not ready (%d exits)", len(exits))
	}
	if len(exits) > 0 {
		rep.note("db: serve exited %d times by itself; the first: %s", len(exits), exits[0])
	}
	rep.check(sc, "serve ready while the database is down", readyV, "ready", readyDown >= 0, false)
	rep.check(sc, "CDRs handed to a bridge, not stored (lost)", fmt.Sprintf("%d of %d", lost, delivered), "0", lost == 0, false)
	rep.check(sc, "CDRs stored twice", fmt.Sprint(doubled), "0", doubled == 0, true)
	crashes, first := r.serve.crashes()
	rep.check(sc, "serve crashes (panic, fatal error, race)", fmt.Sprint(crashes), "0", crashes == 0, true)
	if first != "" {
		rep.note("db: serve crashed: %s", first)
	}
	for k, v := range map[string]int{"calls_successful": res.Successful, "calls_failed": res.Failed, "cdr_emitted": len(emitted),
		"cdr_handed_to_bridge": delivered, "cdr_in_flight_at_kill": inFlight, "cdr_emitted_without_bridge": undelivered,
		"cdr_stored": stored, "kill9": len(r.kills), "serve_starts": starts} {
		rep.count(sc, k, float64(v))
	}
	rep.check(sc, "CDRs emitted while no serve ran, DB down", fmt.Sprint(undeliveredDown), "0", undeliveredDown == 0, false)
	return nil
}

// nearKill reports whether t is within ChaosConfig.CDRInFlight before a kill, or
// within a second after it. r.mu held.
func (r *dbRun) nearKill(t time.Time) bool {
	for _, k := range r.kills {
		if !t.Before(k.Add(-r.cfg.CDRInFlight)) && t.Before(k.Add(time.Second)) {
			return true
		}
	}
	return false
}
