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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
	"github.com/ctibridge/ctibridge/bus/natstest/netns"
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
	// NATSKills is how many times one of the 3 nats-servers is killed
	// (SIGKILL: in turn a server leading neither the op stream nor the
	// lease bucket in JetStream, the op stream's leader, the lease
	// bucket's leader) between the leader's kills;
	// NATSDown how long it stays dead while calls run before it is started
	// again (longer than nats-server's election timeout, up to 9 s).
	// Defaults 3 and 10 s; negative NATSKills: none.
	NATSKills int
	NATSDown  time.Duration
	// EdgeKills is how many times an edge is killed (SIGKILL, each in
	// turn, started again RestartDelay later); its WebSocket clients resume
	// on another edge. Default 2 with 2 edges or more; negative: none.
	EdgeKills int
	// Partitions is how many times the leading bridge is cut off from
	// NATS by a network namespace (failover_partition.go) between the
	// leader's kills. Default 5; negative: none. Without root no
	// namespace can be made: the partitions are skipped, the report says
	// why.
	Partitions int
	// LeaseTTL and LeaseBucket are the bus's lease TTL and KV bucket
	// (bus.DefaultLeaseTTL, bus.LeaseBucket; serve has no setting for
	// either). Required: loadtest knows ctibridge over the network only.
	LeaseTTL    time.Duration
	LeaseBucket string
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
	if c.LeaseTTL <= 0 || c.LeaseBucket == "" {
		return errors.New("loadtest: failover: the bus's lease TTL and bucket are required")
	}
	if c.Kills <= 0 {
		c.Kills = 20
	}
	if c.Edges <= 0 {
		c.Edges = 2
	}
	if c.NATSKills == 0 {
		c.NATSKills = 3
	}
	c.NATSKills = max(c.NATSKills, 0)
	if c.EdgeKills == 0 && c.Edges > 1 {
		c.EdgeKills = 2
	}
	if c.EdgeKills > 0 && c.Edges < 2 {
		return errors.New("loadtest: failover: an edge's clients need another edge to resume on (--edges 2 or more)")
	}
	c.EdgeKills = max(c.EdgeKills, 0)
	if c.Partitions == 0 {
		c.Partitions = 5
	}
	c.Partitions = max(c.Partitions, 0)
	def(&c.NATSDown, 10*time.Second)
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
		SIPpBinary: c.SIPpBinary, RestartDelay: c.RestartDelay, Log: c.Log, amiUsers: []string{"bridge-a", "bridge-b"}}
}

// failNode is one bridge or edge process and what the run reads of it.
type failNode struct {
	name   string
	proc   *serveProc
	tokens map[string]string // edges: user -> token
	view   *wsView           // edges: the admin's client, on it but while it is down
}

// token is the admin's token on the node.
func (n *failNode) token() string { return n.tokens["admin"] }

// failClient is one WebSocket client kept the whole run: the admin's and
// each limited user's on every edge; while its edge is down it is on
// another.
type failClient struct {
	user string
	home *failNode // the edge it belongs to
	on   *failNode // the edge it is connected to
	view *wsView
}

func (c *failClient) name() string { return c.home.name + " " + c.user + "'s WebSocket" }

// foUser is a user of the run's users file that is limited to own: a
// user (not an admin) who sees every extension's presence but the
// numbers and channel names of its own calls only (docs/websocket.md,
// "Permissions").
type foUser struct {
	name string
	own  []string
}

// limitedUsers are the run's limited users: two, owning three callers
// each (SIPp calls every caller in turn).
func limitedUsers(callers []string) []foUser {
	var out []foUser
	for i := range 2 {
		if len(callers) >= 3*(i+1) {
			out = append(out, foUser{name: "agent" + strconv.Itoa(i+1), own: callers[3*i : 3*i+3]})
		}
	}
	return out
}

// writeFailoverUsers writes dir/users.yaml (where newNodeProc's --users
// points) with the admin and the limited users, password "admin" each:
// the same file on every node (the users' names are in the engine's
// fingerprint).
func writeFailoverUsers(dir, hash string, users []foUser) error {
	var b strings.Builder
	fmt.Fprintf(&b, "users:\n  - username: admin\n    password_hash: %q\n    role: admin\n", hash)
	for _, u := range users {
		fmt.Fprintf(&b, "  - username: %s\n    password_hash: %q\n    role: user\n    endpoints: [%s]\n", u.name, hash, strings.Join(u.own, ", "))
	}
	return os.WriteFile(filepath.Join(dir, "users.yaml"), []byte(b.String()), 0o600)
}

// failRun is the state of one failover run.
type failRun struct {
	cfg     FailoverConfig
	sc      *chaosScene
	urls    string
	dsn     string
	nats    []*natscluster.Server
	users   []foUser
	bridges []*failNode
	edges   []*failNode
	clients []*failClient
	lease   *leaseWatch
	truth   *truth
	wit     *cdrWitness
	resume  *wsView // the client that moves to another edge at each kill
	onEdge  int     // the edge resume is on
	kills   []FailoverKill
	natsK   []FailoverNATSKill
	edgeK   []FailoverEdgeKill
	firm    firmWatch // the live clients sampled against pbxsim (failover_firm.go)
	// The partitions (failover_partition.go): each bridge's namespace,
	// why there are none, what pbxsim got, each round.
	nets     map[string]*netns.NS
	partSkip string
	pbxLog   pbxActions
	parts    []FailoverPartition

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
	// The servers do not tell clients of the others' addresses: a bridge
	// cut off by its namespace (its URLs are relays through it) would
	// otherwise reconnect straight to one after a NATS server's kill and
	// be partitioned no more.
	nats, err := natscluster.StartConf(filepath.Join(dir, "nats"), 3, "cluster { no_advertise: true }")
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
	r := &failRun{cfg: cfg, nats: nats, urls: natscluster.URLs(nats), dsn: pg.DSN(), wit: newCDRWitness()}
	defer r.closeNets() // once the nodes have stopped (sc.close)
	ccfg := cfg.chaos()
	ccfg.amiTrace = r.pbxLog.trace
	ctx, sc, err := newChaosScene(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	r.sc, r.truth, r.users = sc, newTruth(sc.pbx.busy), limitedUsers(sc.pbx.callers)
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
	fctx, stopFirm := context.WithCancel(ctx)
	firmDone := make(chan struct{})
	go func() { defer close(firmDone); r.watchFirm(fctx) }()
	r.killLoop(ctx)
	stopFirm()
	<-firmDone
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
	hash, err := adminHash()
	if err != nil {
		return err
	}
	bridgeURLs, err := r.cutOffNATS()
	if err != nil {
		return err
	}
	for i := range 2 + r.cfg.Edges {
		n := &failNode{}
		var err error
		if i < 2 {
			n.name = "bridge-" + string(rune('a'+i))
		} else {
			n.name = "edge-" + strconv.Itoa(i-1)
		}
		ndir := filepath.Join(dir, n.name)
		if err = os.MkdirAll(ndir, 0o755); err != nil {
			return err
		}
		if i < 2 {
			urls := r.urls
			if u, ok := bridgeURLs[n.name]; ok {
				urls = u // through its namespace: a partition can cut it off
			}
			// Its own AMI user: pbxsim's log tells the bridges' actions apart.
			n.proc, err = newServeProc(ccfg, ndir, r.sc.pbx.pbx.AMIAddr(), "--bus", urls, "--bus-node", n.name, "--db", r.dsn, "--ami-user", n.name)
		} else {
			n.proc, err = newNodeProc(ccfg, ndir, "edge", "--bus", r.urls, "--bus-node", n.name)
		}
		if err != nil {
			return err
		}
		if err := writeFailoverUsers(ndir, hash, r.users); err != nil {
			return err
		}
		r.sc.wg.Go(func() { n.proc.run(ctx) })
		if _, err := n.proc.waitReady(ctx, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		if i < 2 {
			r.bridges = append(r.bridges, n)
			continue
		}
		if err := r.login(ctx, n); err != nil {
			return err
		}
		for _, u := range append([]foUser{{name: "admin"}}, r.users...) {
			c := &failClient{user: u.name, home: n, on: n, view: newWSView()}
			if u.own != nil {
				c.view = newUserView(u.own)
			}
			if err := c.view.connect(ctx, n.proc.httpURL(), n.tokens[u.name], false); err != nil {
				return err
			}
			r.clients = append(r.clients, c)
		}
		n.view = r.clients[len(r.clients)-1-len(r.users)].view
		r.edges = append(r.edges, n)
	}
	if r.lease, err = watchLease(ctx, &r.sc.wg, r.urls, r.cfg.LeaseBucket, "default"); err != nil {
		return err
	}
	r.resume = newWSView()
	return r.resume.connect(ctx, r.edges[0].proc.httpURL(), r.edges[0].token(), false)
}

// login logs the admin and the limited users in on edge n.
func (r *failRun) login(ctx context.Context, n *failNode) error {
	n.tokens = map[string]string{}
	for _, u := range append([]string{"admin"}, r.userNames()...) {
		t, err := Login(ctx, n.proc.httpURL(), u, "admin", false)
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		n.tokens[u] = t
	}
	return nil
}

func (r *failRun) userNames() []string {
	var out []string
	for _, u := range r.users {
		out = append(out, u.name)
	}
	return out
}

func (r *failRun) closeViews() {
	for _, c := range r.clients {
		c.view.close()
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
