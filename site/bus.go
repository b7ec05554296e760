package site

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// BusConfig is what one PBX's part of a bus node is built from.
type BusConfig struct {
	// Node is the node's bus configuration (URL, PBX, Node, Prefer,
	// YieldAfter, Log); OpenBus sets its replicas.
	Node bus.Config
	Edge bool // follow the bus only: no AMI link, no candidate
	// RollBytes and RollAge are a leading candidate's rollover
	// settings (bus.Config's).
	RollBytes int64
	RollAge   time.Duration
	Engine    calls.Config
	Link      link.Config
	AMI       ami.Config // a candidate's AMI client's and the CDR session's
	// Observe, when set, is fed every CDR from an AMI session of the
	// PBX's own (the history recorder's), whoever leads; a named PBX's
	// (Named) with its ids qualified (QualifyCDRs).
	Observe func(ami.Message)
	Named   bool
}

// BusPBX is one PBX's part of a bus node: the bus.Node that follows the
// PBX's op log into the replica clients read (Engine), and, on a bridge,
// the candidate that contends for the PBX's lead and leads it (its own
// bus.Node, AMI client and link: bus.Contender) and (with a CDR
// recorder) an AMI session of its own that feeds the recorder whoever
// leads, so no Cdr event is missed during a takeover (the writes are
// idempotent: two bridges record each CDR once).
type BusPBX struct {
	name      string
	node      *bus.Node      // follows; never leads
	eng       *calls.Engine  // node's served replica's
	contender *bus.Contender // nil on an edge
	cdrClient *ami.Client    // nil on an edge or without a recorder
	observe   func(ami.Message)
}

// OpenBus opens the bus node of the PBX cfg.Node.PBX names with the
// engine configuration cfg.Engine and, on a bridge, its first
// candidate; a candidate's AMI client and the CDR session (when Observe
// is set) log in with cfg.AMI.
func OpenBus(ctx context.Context, cfg BusConfig) (_ *BusPBX, err error) {
	served := bus.NewReplica(cfg.Engine)
	ncfg := cfg.Node
	ncfg.Served, ncfg.Fingerprint = served, bus.EngineFingerprint(cfg.Engine)
	p := &BusPBX{name: ncfg.PBX, eng: served.Engine()}
	if p.node, err = bus.Open(ctx, ncfg); err != nil {
		return nil, err
	}
	if cfg.Edge {
		return p, nil
	}
	cfg.Node = ncfg
	log := cmpLog(ncfg.Log)
	p.contender = &bus.Contender{PBX: p.name, Log: log, New: func(ctx context.Context) (*bus.Candidate, error) { return newCandidate(ctx, cfg) }}
	if err := p.contender.Start(ctx); err != nil {
		p.node.Close()
		return nil, err
	}
	if cfg.Observe != nil {
		p.cdrClient, p.observe = ami.NewClient(cfg.AMI), cfg.Observe
		if cfg.Named {
			p.observe = QualifyCDRs(p.name, p.eng, p.observe)
		}
	}
	return p, nil
}

func cmpLog(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// newCandidate builds a fresh candidate for cfg's PBX: its own AMI
// client, primary replica and link.
func newCandidate(ctx context.Context, cfg BusConfig) (*bus.Candidate, error) {
	client := ami.NewClient(cfg.AMI)
	pcfg := cfg.Engine
	pcfg.FeedSize = 16 // their feeds are read by nobody
	primary := bus.NewReplica(pcfg)
	ncfg := cfg.Node
	ncfg.Served = bus.NewReplica(pcfg)
	ncfg.LinkPBX = bus.NewLinkPBX(client) // lets the leader roll the op log over
	lcfg := cfg.Link
	lcfg.OnMessage = nil
	l := link.New(ncfg.LinkPBX, primary, lcfg)
	ncfg.Primary, ncfg.Actions, ncfg.Refresh = primary, client, l.Refresh
	ncfg.Reachable = reachable(cfg.AMI)
	ncfg.RollBytes, ncfg.RollAge = cfg.RollBytes, cfg.RollAge
	ncfg.Lead = func(ctx context.Context) error {
		// The client outlives the link so that it logs off.
		client := GoOwn(func(ctx context.Context) { client.Run(ctx) })
		defer client.Stop()
		return l.Run(ctx)
	}
	node, err := bus.Open(ctx, ncfg)
	if err != nil {
		return nil, err
	}
	return &bus.Candidate{Node: node, Client: client, Link: l}, nil
}

// reachable is a bridge candidate's check that it could lead
// (bus.Config.Reachable): before a preferred one asks for the lead, and
// when a leader whose link is down asks it to take over. It logs in to
// the PBX's manager with acfg and logs off (ami.Probe): a wrong secret
// fails it as a dead address does.
func reachable(acfg ami.Config) func(ctx context.Context) error {
	return func(ctx context.Context) error { return ami.Probe(ctx, acfg) }
}

// Engine is the served replica's engine.
func (p *BusPBX) Engine() *calls.Engine { return p.eng }

// Node is the node that follows the PBX's op log (State, Ready, Epoch,
// OpaqueKey).
func (p *BusPBX) Node() *bus.Node { return p.node }

// Leading reports whether this node leads the PBX.
func (p *BusPBX) Leading() bool { return p.leader() != nil }

func (p *BusPBX) leader() *bus.Candidate {
	if p.contender == nil {
		return nil
	}
	return p.contender.Leader()
}

// Do sends an action to the PBX (rest.PBX): through the candidate while
// it leads (its own AMI client), else to the leader over NATS. A
// candidate that stepped down when its lease ran out (cut off from NATS)
// refuses it, bus.ErrStaleLease (503 lease_stale), until a fresh one
// stands by.
func (p *BusPBX) Do(ctx context.Context, a ami.Message) (ami.Response, error) {
	if cand := p.leader(); cand != nil {
		return cand.Node.Do(ctx, a)
	}
	if p.contender != nil {
		if cand := p.contender.Current(); cand != nil && cand.Node.Fenced() {
			return cand.Node.Do(ctx, a)
		}
	}
	return p.node.Do(ctx, a)
}

// Refresh asks the leader's link to re-read what actions changed in
// AstDB (rest.Refresher), as Do goes.
func (p *BusPBX) Refresh(actions ...ami.Message) bool {
	if cand := p.leader(); cand != nil {
		return cand.Node.Refresh(actions...)
	}
	return p.node.Refresh(actions...)
}

// observeCDRs feeds the history recorder from the PBX's own AMI session
// until ctx ends.
func (p *BusPBX) observeCDRs(ctx context.Context) {
	client := GoOwn(func(ctx context.Context) { p.cdrClient.Run(ctx) })
	defer client.Stop()
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

// Run starts the node and the contender (and the CDR session) on wg
// with ctx; it returns what stops the CDR session, after ctx's
// goroutines have stopped. An error is sent on errc unless ctx ends
// first.
func (p *BusPBX) Run(ctx context.Context, wg *sync.WaitGroup, errc chan<- error) (stop func()) {
	fail := func(err error) {
		if err != nil && ctx.Err() == nil {
			select {
			case errc <- fmt.Errorf("bus %s: %w", p.name, err):
			case <-ctx.Done():
			}
		}
	}
	wg.Go(func() { fail(p.node.Run(ctx)) })
	if p.contender != nil {
		wg.Go(func() { fail(p.contender.Run(ctx)) })
	}
	if p.cdrClient == nil {
		return func() {}
	}
	return GoOwn(p.observeCDRs).Stop
}

// Close closes the PBX's NATS connections. Call it after Run's
// goroutines have stopped.
func (p *BusPBX) Close() {
	p.node.Close()
	if p.contender != nil {
		p.contender.Close()
	}
}

// Collector is the PBX's figures: on an edge its node's, on a bridge
// its current candidate's (its node, which follows too and leads, its
// link and AMI client: ctibridge_ami_*, ctibridge_ready).
func (p *BusPBX) Collector() prometheus.Collector { return busCollector{p} }

type busCollector struct{ p *BusPBX }

func (c busCollector) collectors() []prometheus.Collector {
	var cand *bus.Candidate
	if c.p.contender != nil {
		cand = c.p.contender.Current()
	}
	if cand == nil {
		return []prometheus.Collector{bus.NewCollector(c.p.node)}
	}
	return []prometheus.Collector{bus.NewCollector(cand.Node), link.NewCollector(cand.Link, cand.Client)}
}

func (c busCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, col := range c.collectors() {
		col.Describe(ch)
	}
}

func (c busCollector) Collect(ch chan<- prometheus.Metric) {
	for _, col := range c.collectors() {
		col.Collect(ch)
	}
}
