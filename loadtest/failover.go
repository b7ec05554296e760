package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
	"github.com/ctibridge/ctibridge/dbtest/pgcluster"
	"github.com/ctibridge/ctibridge/sipp"
)

// FailoverConfig is one `loadtest failover` run: the scale-out topology
// with real processes (a 3-server nats-server cluster with JetStream,
// pbxsim in this process with SIPp calls, two bridges and the edges as
// `ctibridge serve --bus` and `ctibridge edge` child processes, a
// throwaway PostgreSQL both bridges record CDRs in), the leading bridge
// killed with SIGKILL again and again while calls run (docs/loadtest.md).
// The zero value of a field means its default.
type FailoverConfig struct {
	// Binary is the ctibridge executable run as serve and edge. Required.
	Binary string
	// ServeArgs are appended to every bridge's and edge's command line.
	ServeArgs []string
	// Kills is how many times the leading bridge is killed. Default 20.
	Kills int
	// Edges is the number of edge nodes (1 or more). Default 2.
	Edges int
	// Rate is SIPp calls per second; Talk how long each lasts; Pairs the
	// caller/callee pairs. Defaults 5/s, 2 s, enough for the rate.
	Rate  float64
	Talk  time.Duration
	Pairs int
	// SIPpBinary overrides "sipp" from PATH.
	SIPpBinary string
	// Settle is how long calls run under a steady leader between two
	// kills, once the killed bridge is back as a standby. Default 2 s.
	Settle time.Duration
	// KillTimeout bounds the wait for a takeover (the lease taken and
	// every edge live again): a kill not taken over by then fails the
	// run. Default 30 s.
	KillTimeout time.Duration
	// RestartDelay is how long a killed bridge stays dead before it is
	// started again, as a standby (systemd's RestartSec). Default 1 s.
	RestartDelay time.Duration
	// Grace is how long pbxsim's truth must have held before a client
	// that disagrees counts (a ghost or a missing call), and how long after
	// the edges are live again their state is judged. Default 1 s.
	Grace time.Duration
	// MaxLive, when set, is a bound every kill's "edges live again" must
	// keep: an invariant check (CI's, looser than the 5 s target).
	MaxLive time.Duration
	// Dir holds the work files (the nodes' logs and data, the NATS
	// stores). Default: a temporary directory, removed unless Keep.
	Dir  string
	Keep bool
	// Log receives progress. Default: discard.
	Log *slog.Logger
}

// leaseTTL is the bus's default lease TTL (bus.Config.LeaseTTL), which
// serve has no setting for: what every run uses.
const leaseTTL = 3 * time.Second

func (c *FailoverConfig) setDefaults() error {
	if c.Binary == "" {
		return errors.New("loadtest: failover: no ctibridge binary to run as serve and edge")
	}
	if _, err := exec.LookPath(c.Binary); err != nil {
		return fmt.Errorf("loadtest: failover: the ctibridge binary: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Kills <= 0 {
		c.Kills = 20
	}
	if c.Edges <= 0 {
		c.Edges = 2
	}
	if c.Rate <= 0 {
		c.Rate = 5
	}
	def(&c.Talk, 2*time.Second)
	if c.Pairs <= 0 {
		c.Pairs = int(c.Rate*(c.Talk+300*time.Millisecond).Seconds()*1.5) + 5
	}
	def(&c.Settle, 2*time.Second)
	def(&c.KillTimeout, 30*time.Second)
	def(&c.RestartDelay, time.Second)
	def(&c.Grace, time.Second)
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// chaos is the ChaosConfig the shared pieces (pbxsim, SIPp, serveProc)
// take.
func (c *FailoverConfig) chaos() ChaosConfig {
	return ChaosConfig{Binary: c.Binary, ServeArgs: c.ServeArgs, Rate: c.Rate, Talk: c.Talk, Pairs: c.Pairs,
		SIPpBinary: c.SIPpBinary, RestartDelay: c.RestartDelay, Log: c.Log}
}

// failNode is one bridge or edge process and what the run reads of it.
type failNode struct {
	name  string
	proc  *serveProc
	token string
	view  *wsView // edges: a client that stays connected the whole run
}

// failRun is the state of one failover run.
type failRun struct {
	cfg     FailoverConfig
	sc      *chaosScene
	urls    string
	dsn     string
	bridges []*failNode
	edges   []*failNode
	lease   *leaseWatch
	truth   *truth
	wit     *cdrWitness
	resume  *wsView // the client that moves to another edge at each kill
	onEdge  int     // the edge resume is on
	kills   []FailoverKill

	callsMu  sync.Mutex
	calls    sipp.Result
	callsErr error // SIPp's first failure
	// sippFailures counts the batches SIPp failed.
	sippFailures int
	stopCall     atomic.Bool
}

// RunFailover starts the topology, kills the leading bridge cfg.Kills
// times and reports each takeover, the ghosts after it, the resumes and
// the CDRs. An error means the run could not start (no nats-server, sipp
// or PostgreSQL; a node never ready); a failed check is in the report.
func RunFailover(ctx context.Context, cfg FailoverConfig) (*FailoverReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if _, err := sipp.LookPath(cfg.SIPpBinary); err != nil {
		return nil, fmt.Errorf("loadtest: failover: the calls are SIPp's: %w", err)
	}
	dir, err := workDir(cfg.Dir, "ctibridge-failover-")
	if err != nil {
		return nil, err
	}
	rep := newFailoverReport(cfg)
	defer func() { rep.Elapsed = time.Since(rep.Started) }()
	if cfg.Keep {
		rep.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	nats, err := natscluster.Start(filepath.Join(dir, "nats"), 3)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range nats {
			s.Kill()
		}
	}()
	pg, err := pgcluster.Start(pgcluster.Config{Prefix: "ctibridge-failover-pg-"})
	if err != nil {
		return nil, err
	}
	defer pg.Remove()
	defer pg.Stop()
	ctx, sc, err := newChaosScene(ctx, cfg.chaos())
	if err != nil {
		return nil, err
	}
	defer sc.close()
	r := &failRun{cfg: cfg, sc: sc, urls: natscluster.URLs(nats), dsn: pg.DSN(), truth: newTruth(sc.pbx.busy), wit: newCDRWitness()}
	sc.wg.Go(func() { r.truth.run(ctx) })
	if err := r.wit.start(ctx, &sc.wg, sc.pbx.pbx.AMIAddr()); err != nil {
		return nil, err
	}
	defer r.closeViews()
	if err := r.startNodes(ctx, dir); err != nil {
		return rep, err
	}
	callsDone := make(chan struct{})
	go func() { defer close(callsDone); r.placeCalls(ctx) }()
	r.killLoop(ctx)
	r.stopCall.Store(true)
	<-callsDone
	r.finish(ctx, rep)
	return rep, nil
}

// startNodes starts the bridges (bridge-a first, so it leads), the
// edges, the lease watch and the WebSocket clients, and waits until all
// are ready.
func (r *failRun) startNodes(ctx context.Context, dir string) error {
	ccfg := r.cfg.chaos()
	for i := range 2 + r.cfg.Edges {
		var n failNode
		var err error
		if i < 2 {
			n.name = "bridge-" + string(rune('a'+i))
			ndir := filepath.Join(dir, n.name)
			if err = os.MkdirAll(ndir, 0o755); err != nil {
				return err
			}
			n.proc, err = newServeProc(ccfg, ndir, r.sc.pbx.pbx.AMIAddr(), "--bus", r.urls, "--bus-node", n.name, "--db", r.dsn)
		} else {
			n.name = "edge-" + strconv.Itoa(i-1)
			ndir := filepath.Join(dir, n.name)
			if err = os.MkdirAll(ndir, 0o755); err != nil {
				return err
			}
			n.proc, err = newNodeProc(ccfg, ndir, "edge", "--bus", r.urls, "--bus-node", n.name)
		}
		if err != nil {
			return err
		}
		r.sc.wg.Go(func() { n.proc.run(ctx) })
		if _, err := n.proc.waitReady(ctx, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		if i < 2 {
			r.bridges = append(r.bridges, &n)
			continue
		}
		if n.token, err = n.proc.login(ctx); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		n.view = newWSView()
		if err := n.view.connect(ctx, n.proc.http, n.token, false); err != nil {
			return err
		}
		r.edges = append(r.edges, &n)
	}
	var err error
	if r.lease, err = watchLease(ctx, &r.sc.wg, r.urls, "default"); err != nil {
		return err
	}
	r.resume = newWSView()
	return r.resume.connect(ctx, r.edges[0].proc.http, r.edges[0].token, false)
}

func (r *failRun) closeViews() {
	for _, e := range r.edges {
		if e.view != nil {
			e.view.close()
		}
	}
	if r.resume != nil {
		r.resume.close()
	}
}

// placeCalls runs SIPp in batches of 10 s until stopCall, adding up the
// results. A batch that fails (SIPp could not start: a port another
// process took meanwhile) is retried after a second, three times in a
// row at most.
func (r *failRun) placeCalls(ctx context.Context) {
	for failed := 0; !r.stopCall.Load() && ctx.Err() == nil && failed < 3; {
		res, err := r.sc.pbx.calls(ctx, r.cfg.chaos(), 10*time.Second)
		r.callsMu.Lock()
		r.calls.Created += res.Created
		r.calls.Successful += res.Successful
		r.calls.Failed += res.Failed
		if err != nil && ctx.Err() == nil {
			r.sippFailures++
			if r.callsErr == nil {
				r.callsErr = fmt.Errorf("%w: %s", err, res.Errors)
			}
		}
		r.callsMu.Unlock()
		if err == nil {
			failed = 0
			continue
		}
		failed++
		sleepCtx(ctx, time.Second)
	}
}

// callsError is why SIPp stopped placing calls, or nil.
func (r *failRun) callsError() error {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	return r.callsErr
}

// bridge is the bridge named name.
func (r *failRun) bridge(name string) *failNode {
	for _, b := range r.bridges {
		if b.name == name {
			return b
		}
	}
	return nil
}
