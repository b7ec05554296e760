package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/webhook"
)

// busConfig is the scale-out settings (docs/scale-out.md).
type busConfig struct {
	url  string // NATS servers; "" runs alone
	pbx  string // names the PBX's stream and subjects
	edge bool   // follow the bus only: no AMI link
	node string // this node's name in the lease
	// prefer names the PBXs (by their names on the bus) this bridge
	// leads whenever it is up (--bus-prefer): comma-separated.
	prefer string
	// A new generation of the op log past this size or age (0: never).
	rollMiB int64
	rollAge time.Duration
	// yieldAfter: a leader whose AMI link is down this long hands the
	// lead to a standby that logs in (negative: never).
	yieldAfter time.Duration
}

func busSettings(s *settings, c *busConfig) {
	s.str(&c.url, "bus", "", "NATS JetStream servers (nats://host:4222,...): share the PBX's state with other nodes (docs/scale-out.md)")
	s.str(&c.pbx, "bus-pbx", "default", "name of the PBX on the bus (letters, digits, - and _): its stream and subjects")
	s.boolean(&c.edge, "bus-edge", false, "edge node: no AMI link, the state comes from the bus (ctibridge edge sets it)")
	s.str(&c.node, "bus-node", "", "this node's name on the bus, unique per node (default host-pid)")
	s.str(&c.prefer, "bus-prefer", "", "PBXs this bridge leads whenever it is up, by their names on the bus (--bus-pbx's for the PBX of --ami, --pbx names), comma-separated: a bridge leading one of them that does not prefer it hands it over (docs/operations.md)")
	s.list[len(s.list)-1].repeat = true
	s.integer(&c.rollMiB, "bus-roll-mib", bus.DefaultRollBytes>>20, "the leader starts a new generation of the op log (a fresh resync; the old one purged) past this many MiB (0: never)")
	s.dur(&c.rollAge, "bus-roll-age", bus.DefaultRollAge, "the leader starts a new generation of the op log when the current one is this old (0: never)")
	s.dur(&c.yieldAfter, "bus-yield-after", bus.DefaultYieldAfter, "a leading bridge whose AMI link has been down this long hands the lead to a standby bridge that logs in to the PBX (0: never)")
}

// prefers reports whether --bus-prefer names pbx.
func (c busConfig) prefers(pbx string) bool {
	for _, p := range splitList(c.prefer) {
		if p == pbx {
			return true
		}
	}
	return false
}

// rollSettings maps the rollover settings to bus.Config's (0: never).
func (c busConfig) rollSettings(cfg *bus.Config) {
	cfg.RollBytes, cfg.RollAge = c.rollMiB<<20, c.rollAge
	if c.rollMiB == 0 {
		cfg.RollBytes = -1
	}
	if c.rollAge == 0 {
		cfg.RollAge = -1
	}
}

// yieldSetting maps --bus-yield-after to bus.Config's (0: never).
func (c busConfig) yieldSetting() time.Duration {
	if c.yieldAfter == 0 {
		return -1
	}
	return c.yieldAfter
}

// checkBus validates the bus settings.
func checkBus(c busConfig, add func(name string, warn bool, hint, format string, args ...any)) {
	if c.url == "" {
		if c.edge {
			add("bus-edge", false, "set --bus to the NATS servers", "an edge needs --bus")
		}
		if c.prefer != "" {
			add("bus-prefer", false, "it says which bridge leads a PBX on the bus: set --bus, or drop it", "without --bus")
		}
		return
	}
	for _, u := range strings.Split(c.url, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Host == "" {
			add("bus", false, "nats://host:4222 or tls://host:4222, comma-separated", "%q is not a NATS server URL", u)
		}
	}
	if err := bus.CheckName(c.pbx); err != nil {
		add("bus-pbx", false, "letters, digits, - and _ (at most 64)", "%v", err)
	}
	if c.rollMiB < 0 || c.rollAge < 0 {
		add("bus-roll-mib", false, "a size in MiB and a duration, 0 for never", "negative rollover setting (%d MiB, %v)", c.rollMiB, c.rollAge)
	}
	if c.yieldAfter < 0 {
		add("bus-yield-after", false, "a duration, 0 for never", "negative: %v", c.yieldAfter)
	}
}

// checkBusPBXs checks the named PBXs of a bus node (--pbx with --bus):
// each PBX has a stream and a lease of its own, the default PBX's named
// by --bus-pbx, a named PBX's by its name.
func checkBusPBXs(c busConfig, specs []pbxSpec, add func(name string, warn bool, hint, format string, args ...any)) {
	if c.url == "" {
		return
	}
	streams := map[string]string{bus.StreamName(c.pbx): "--bus-pbx " + strconv.Quote(c.pbx)}
	for _, sp := range specs {
		st := bus.StreamName(sp.name)
		if other, ok := streams[st]; ok {
			add("pbx", false, "on the bus each PBX has a stream of its own, named after --bus-pbx for the PBX of --ami and after its name for the others: rename one",
				"PBX %q and %s would share the stream %s", sp.name, other, st)
		}
		streams[st] = fmt.Sprintf("PBX %q", sp.name)
	}
	if c.prefer != "" && c.edge {
		add("bus-prefer", false, "give it to the bridges: an edge leads no PBX", "on an edge")
		return
	}
	for _, name := range splitList(c.prefer) {
		if !followed(c, specs, name) {
			add("bus-prefer", false, "name the PBX of --ami by --bus-pbx ("+strconv.Quote(c.pbx)+"), the others by their --pbx names",
				"PBX %q is not one this bridge follows", name)
		}
	}
}

// followed reports whether name is the bus name of the PBX of --ami or
// of one of specs.
func followed(c busConfig, specs []pbxSpec, name string) bool {
	if name == c.pbx {
		return true
	}
	for _, sp := range specs {
		if sp.name == name {
			return true
		}
	}
	return false
}

// edgeArgs are the arguments of `ctibridge edge`: serve's, as an edge.
func edgeArgs(args []string) []string { return append([]string{"--bus-edge=true"}, args...) }

// busPBX is one PBX's part of a bus node: the bus.Node that follows the
// PBX's op log into the replica clients read (eng), and, on a bridge,
// the candidate that contends for the PBX's lead and leads it (its own
// bus.Node, AMI client and link) and (with a CDR recorder) an AMI
// session of its own that feeds the recorder whoever leads, so no Cdr
// event is missed during a takeover (the writes are idempotent: two
// bridges record each CDR once). A candidate deposed (bus.ErrDeposed)
// is replaced by a fresh one, standing by: the PBX's lead alone is
// lost, the replica clients read goes on following, the process and its
// other PBXs are untouched (docs/scale-out.md, "Deposed").
type busPBX struct {
	name      string    // on the bus: its stream's and lease's
	node      *bus.Node // follows; never leads
	eng       *calls.Engine
	candidate func(ctx context.Context) (*candidate, error) // nil on an edge
	cur       atomic.Pointer[candidate]                     // the one contending or leading
	cdrClient *ami.Client                                   // nil on an edge or without a recorder
	observe   func(ami.Message)
	log       *slog.Logger
}

// candidate is what a bridge contends for a PBX's lead with, and leads
// it with: a bus.Node whose primary replica the link drives while it
// leads, over an AMI client of its own. Each is built fresh and used
// once: a deposed one's primary engine may hold ops the stream lacks,
// and an AMI client runs once.
type candidate struct {
	node   *bus.Node
	client *ami.Client
	link   *link.Link
	done   atomic.Bool // its node's Run returned
}

// openBus builds the default PBX's bus node instead of a lone engine and
// link, and, with --pbx, each named PBX's (newSites); clients are served
// by replicas of the bus's op logs.
func (b *bridge) openBus(ctx context.Context, c serveConfig, specs []pbxSpec, ecfg calls.Config, lcfg link.Config, acfg ami.Config, rec *history.Recorder) (err error) {
	var observe func(ami.Message)
	if rec != nil {
		observe = rec.Observe
	}
	b.client = nil // each candidate has its own (busPBX.candidate)
	b.bus, err = openBusPBX(ctx, c, c.bus.pbx, defaultPBXConfig(specs, ecfg), lcfg, acfg, observe, b.log)
	if err != nil {
		return err
	}
	b.eng = b.bus.eng
	auth.SetOpaqueKey(b.bus.node.OpaqueKey())
	b.sites, err = newSites(c, specs, b.bus.node.State(), ecfg, lcfg, b.log, func(sp pbxSpec, sc siteConfig) (*site, error) {
		p, err := openBusPBX(ctx, c, sp.name, sc.eng, sc.link, sc.ami, observe, b.log)
		if err != nil {
			return nil, err
		}
		if p.observe != nil {
			p.observe = qualifyCDRs(sp.name, p.eng, p.observe)
		}
		return &site{spec: sp, eng: p.eng, bus: p}, nil
	})
	if err != nil {
		return fmt.Errorf("--pbx: %w", err)
	}
	return nil
}

// openBusPBX opens the bus node of PBX pbx (its name on the bus) with
// the engine configuration ecfg and, on a bridge, its first candidate;
// a candidate's AMI client and its CDR session (when observe is set) log
// in with acfg.
func openBusPBX(ctx context.Context, c serveConfig, pbx string, ecfg calls.Config, lcfg link.Config, acfg ami.Config, observe func(ami.Message), log *slog.Logger) (_ *busPBX, err error) {
	served := bus.NewReplica(ecfg)
	p := &busPBX{name: pbx, eng: served.Engine(), log: log}
	cfg := bus.Config{URL: c.bus.url, PBX: pbx, Node: c.bus.node, Served: served,
		Fingerprint: bus.EngineFingerprint(ecfg), Prefer: c.bus.prefers(pbx), YieldAfter: c.bus.yieldSetting(), Log: log}
	if p.node, err = bus.Open(ctx, cfg); err != nil {
		return nil, err
	}
	if c.bus.edge {
		return p, nil
	}
	lcfg.OnMessage = nil
	p.candidate = func(ctx context.Context) (*candidate, error) {
		client := ami.NewClient(acfg)
		pcfg := ecfg
		pcfg.FeedSize = 16 // their feeds are read by nobody
		primary := bus.NewReplica(pcfg)
		cfg := cfg
		cfg.Served = bus.NewReplica(pcfg)
		cfg.LinkPBX = bus.NewLinkPBX(client) // lets the leader roll the op log over
		l := link.New(cfg.LinkPBX, primary, lcfg)
		cfg.Primary, cfg.Actions, cfg.Refresh = primary, client, l.Refresh
		cfg.Reachable = reachable(acfg)
		c.bus.rollSettings(&cfg)
		cfg.Lead = func(ctx context.Context) error {
			// The client outlives the link so that it logs off.
			client := goOwn(func(ctx context.Context) { client.Run(ctx) })
			defer client.stop()
			return l.Run(ctx)
		}
		node, err := bus.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &candidate{node: node, client: client, link: l}, nil
	}
	cand, err := p.candidate(ctx)
	if err != nil {
		p.node.Close()
		return nil, err
	}
	p.cur.Store(cand)
	if observe != nil {
		p.cdrClient, p.observe = ami.NewClient(acfg), observe
	}
	return p, nil
}

// reachable is a bridge candidate's check that it could lead
// (bus.Config.Reachable): before a preferred one asks for the lead, and
// when a leader whose link is down asks it to take over. It logs in to
// the PBX's manager with acfg and logs off (ami.Probe): a wrong secret
// fails it as a dead address does.
func reachable(acfg ami.Config) func(ctx context.Context) error {
	return func(ctx context.Context) error { return ami.Probe(ctx, acfg) }
}

// contend runs candidates until ctx ends: one deposed is closed and
// replaced by a fresh one (standBy), which follows the stream and
// contends again a second later (two bridges fencing each other off do
// not spin).
// Another error of a candidate's is the bridge's.
func (p *busPBX) contend(ctx context.Context) error {
	for {
		cand := p.cur.Load()
		err := cand.node.Run(ctx)
		cand.done.Store(true)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, bus.ErrDeposed) {
			return err
		}
		if errors.Is(err, bus.ErrHandedOver) {
			p.log.Info("handed over: a bridge that prefers this PBX leads it; standing by again with a fresh engine", "pbx", p.name)
		} else {
			p.log.Warn("deposed: this PBX's lead is lost, standing by again with a fresh engine; the state clients read goes on following",
				"pbx", p.name, "err", err)
		}
		next := p.standBy(ctx)
		if next == nil {
			return nil // ctx ended
		}
		p.cur.Store(next)
		cand.node.Close()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// standBy makes the candidate that stands by after a deposal, trying
// again with backoff (1 s, doubling up to 30 s) for as long as ctx lives:
// NATS out of reach then (bus.Open gives up after some 15 s) must not
// stop the process, whose served state goes on following (unheard
// meanwhile). Nil once ctx ended.
func (p *busPBX) standBy(ctx context.Context) *candidate {
	wait := time.Second
	for {
		next, err := p.candidate(ctx)
		if err == nil {
			return next
		}
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn("cannot stand by again after a deposal: trying again", "pbx", p.name, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// state is what clients read of the PBX: the served engine, said stale
// while this node cannot hear the PBX's stream (bus.Node.State).
func (s *site) state() calls.Source {
	if s.bus != nil {
		return s.bus.node.State()
	}
	return s.eng
}

// leading reports whether this node leads the PBX.
func (p *busPBX) leading() bool { return p.leader() != nil }

// leader is the candidate that leads the PBX, or nil.
func (p *busPBX) leader() *candidate {
	if cand := p.cur.Load(); cand != nil && !cand.done.Load() && cand.node.Leading() {
		return cand
	}
	return nil
}

// Do sends an action to the PBX (rest.PBX): through the candidate while
// it leads (its own AMI client), else to the leader over NATS. A
// candidate that stepped down when its lease ran out (cut off from NATS)
// refuses it, bus.ErrStaleLease (503 lease_stale), until a fresh one
// stands by.
func (p *busPBX) Do(ctx context.Context, a ami.Message) (ami.Response, error) {
	if cand := p.leader(); cand != nil {
		return cand.node.Do(ctx, a)
	}
	if cand := p.cur.Load(); cand != nil && cand.node.Fenced() {
		return cand.node.Do(ctx, a)
	}
	return p.node.Do(ctx, a)
}

// Refresh asks the leader's link to re-read what actions changed in
// AstDB (rest.Refresher), as Do goes.
func (p *busPBX) Refresh(actions ...ami.Message) bool {
	if cand := p.leader(); cand != nil {
		return cand.node.Refresh(actions...)
	}
	return p.node.Refresh(actions...)
}

// observeCDRs feeds the history recorder from the PBX's own AMI session
// until ctx ends.
func (p *busPBX) observeCDRs(ctx context.Context) {
	client := goOwn(func(ctx context.Context) { p.cdrClient.Run(ctx) })
	defer client.stop()
	for {
		evs, err := p.cdrClient.Next(ctx)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if ev.Link == ami.LinkNone {
				p.observe(ev.Msg)
			}
		}
	}
}

// ready is what /readyz and systemd's READY say: the link is up and
// resynchronised, or, on the bus, the node follows and the state is live
// (each named PBX's too: sites.ready).
func (b *bridge) ready() bool {
	if b.bus != nil {
		return b.bus.node.Ready()
	}
	return b.link.Ready()
}

// run starts the node and the candidates (and the CDR session) on wg
// with ctx; it returns what stops the CDR session, after ctx's
// goroutines have stopped. An error is sent on errc unless ctx ends
// first (Run reads one).
func (p *busPBX) run(ctx context.Context, wg *sync.WaitGroup, errc chan<- error) (stop func()) {
	fail := func(err error) {
		if err != nil && ctx.Err() == nil {
			select {
			case errc <- fmt.Errorf("bus %s: %w", p.name, err):
			case <-ctx.Done():
			}
		}
	}
	wg.Go(func() { fail(p.node.Run(ctx)) })
	if p.candidate != nil {
		wg.Go(func() { fail(p.contend(ctx)) })
	}
	if p.cdrClient == nil {
		return func() {}
	}
	return goOwn(p.observeCDRs).stop
}

// busEpoch is the WebSocket epoch: on the bus with one PBX the stream
// generation's (every node the same, so a client resumes on any), else ""
// (the hub picks a random one). With several PBXs clients read the
// calls.Multi merge, whose seqs are this node's own.
func (b *bridge) busEpoch() string {
	if b.bus == nil || b.sites != nil {
		return ""
	}
	return b.bus.node.Epoch()
}

// webhookPBXs are every PBX's engine for the webhooks, the default PBX's
// first; on the bus each says whether this node leads it (only the
// leading bridge of a PBX sends its events: every node follows the same
// calls, and every bridge's recorder takes every CDR).
func (b *bridge) webhookPBXs(c serveConfig) []webhook.PBX {
	out := []webhook.PBX{{State: b.eng}}
	if b.bus != nil {
		out[0].Sending = b.bus.leading
		if c.bus.edge && c.webhooks != "" {
			b.log.Warn("webhooks on an edge send nothing: only the leading bridge sends them")
		}
	}
	for _, s := range b.sites.all() {
		p := webhook.PBX{Name: s.spec.name, State: s.eng}
		if s.bus != nil {
			p.Sending = s.bus.leading
		}
		out = append(out, p)
	}
	return out
}

// registerBus adds the bus PBXs' figures to /metrics (pbxCollector):
// with named PBXs each PBX's series labelled pbx="default" or
// pbx="<name>".
func (b *bridge) registerBus(reg prometheus.Registerer) error {
	if b.bus == nil {
		return nil
	}
	if b.sites == nil {
		return reg.Register(pbxCollector{b.bus})
	}
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": calls.DefaultPBXName}, reg).Register(pbxCollector{b.bus}); err != nil {
		return err
	}
	for _, s := range b.sites.list {
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": s.spec.name}, reg).Register(pbxCollector{s.bus}); err != nil {
			return err
		}
	}
	return nil
}

// pbxCollector is a bus PBX's figures: on an edge its node's, on a
// bridge its current candidate's (its node, which follows too and
// leads, its link and AMI client: ctibridge_ami_*, ctibridge_ready).
type pbxCollector struct{ p *busPBX }

func (c pbxCollector) collectors() []prometheus.Collector {
	cand := c.p.cur.Load()
	if cand == nil {
		return []prometheus.Collector{bus.NewCollector(c.p.node)}
	}
	return []prometheus.Collector{bus.NewCollector(cand.node), link.NewCollector(cand.link, cand.client)}
}

func (c pbxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, col := range c.collectors() {
		col.Describe(ch)
	}
}

func (c pbxCollector) Collect(ch chan<- prometheus.Metric) {
	for _, col := range c.collectors() {
		col.Collect(ch)
	}
}

// closeBus closes the NATS connections (bridge.close).
func (b *bridge) closeBus() {
	if b.bus != nil {
		b.bus.close()
	}
	b.sites.close()
}

// close closes the PBX's NATS connections. Call it after run's
// goroutines have stopped.
func (p *busPBX) close() {
	p.node.Close()
	if cand := p.cur.Load(); cand != nil {
		cand.node.Close()
	}
}
