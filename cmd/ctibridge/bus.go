package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/link"
)

// busConfig is the scale-out settings (docs/scale-out.md).
type busConfig struct {
	url  string // NATS servers; "" runs alone
	pbx  string // names the PBX's stream and subjects
	edge bool   // follow the bus only: no AMI link
	node string // this node's name in the lease
	// A new generation of the op log past this size or age (0: never).
	rollMiB int64
	rollAge time.Duration
}

func busSettings(s *settings, c *busConfig) {
	s.str(&c.url, "bus", "", "NATS JetStream servers (nats://host:4222,...): share the PBX's state with other nodes (docs/scale-out.md)")
	s.str(&c.pbx, "bus-pbx", "default", "name of the PBX on the bus (letters, digits, - and _): its stream and subjects")
	s.boolean(&c.edge, "bus-edge", false, "edge node: no AMI link, the state comes from the bus (ctibridge edge sets it)")
	s.str(&c.node, "bus-node", "", "this node's name on the bus, unique per node (default host-pid)")
	s.integer(&c.rollMiB, "bus-roll-mib", bus.DefaultRollBytes>>20, "the leader starts a new generation of the op log (a fresh resync; the old one purged) past this many MiB (0: never)")
	s.dur(&c.rollAge, "bus-roll-age", bus.DefaultRollAge, "the leader starts a new generation of the op log when the current one is this old (0: never)")
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

// checkBus validates the bus settings.
func checkBus(c busConfig, add func(name string, warn bool, hint, format string, args ...any)) {
	if c.url == "" {
		if c.edge {
			add("bus-edge", false, "set --bus to the NATS servers", "an edge needs --bus")
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
}

// edgeArgs are the arguments of `ctibridge edge`: serve's, as an edge.
func edgeArgs(args []string) []string { return append([]string{"--bus-edge=true"}, args...) }

// openBus builds the node of a scale-out deployment instead of a lone
// engine and link: clients are served by a replica of the bus's op log;
// a bridge node also has the primary replica its link drives while it
// leads, and (with a CDR recorder) an AMI session of its own that feeds
// the recorder whoever leads, so no Cdr event is missed during a takeover
// (the writes are idempotent: two bridges record each CDR once).
func (b *bridge) openBus(ctx context.Context, c serveConfig, ecfg calls.Config, lcfg link.Config, acfg ami.Config, rec *history.Recorder) error {
	served := bus.NewReplica(ecfg)
	b.eng = served.Engine()
	cfg := bus.Config{URL: c.bus.url, PBX: c.bus.pbx, Node: c.bus.node, Served: served,
		Fingerprint: bus.EngineFingerprint(ecfg), Log: b.log}
	if !c.bus.edge {
		pcfg := ecfg
		pcfg.FeedSize = 16 // its feed is read by nobody
		primary := bus.NewReplica(pcfg)
		lcfg.OnMessage = nil
		cfg.LinkPBX = bus.NewLinkPBX(b.client) // lets the leader roll the op log over
		b.link = link.New(cfg.LinkPBX, primary, lcfg)
		cfg.Primary, cfg.Actions, cfg.Refresh = primary, b.client, b.link.Refresh
		c.bus.rollSettings(&cfg)
		cfg.Lead = b.lead
		if rec != nil {
			b.cdrClient = ami.NewClient(acfg)
		}
	}
	node, err := bus.Open(ctx, cfg)
	if err != nil {
		return err
	}
	b.bus = node
	auth.SetOpaqueKey(node.OpaqueKey())
	return nil
}

// lead runs the AMI link while this bridge leads: the client outlives the
// link so that it logs off.
func (b *bridge) lead(ctx context.Context) error {
	client := goOwn(func(ctx context.Context) { b.client.Run(ctx) })
	defer client.stop()
	return b.link.Run(ctx)
}

// observeCDRs feeds the history recorder from the bridge's own AMI
// session until ctx ends.
func (b *bridge) observeCDRs(ctx context.Context) {
	client := goOwn(func(ctx context.Context) { b.cdrClient.Run(ctx) })
	defer client.stop()
	for {
		evs, err := b.cdrClient.Next(ctx)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if ev.Link == ami.LinkNone {
				b.stores.recorder.Observe(ev.Msg)
			}
		}
	}
}

// ready is what /readyz and systemd's READY say: the link is up and
// resynchronised, or, on the bus, the node follows and the state is live.
func (b *bridge) ready() bool {
	if b.bus != nil {
		return b.bus.Ready()
	}
	return b.link.Ready()
}

// runBus starts the bus node (and the CDR session) in Run; it returns
// what stops them after the main context's goroutines have stopped.
func (b *bridge) runBus(ctx context.Context, wg interface{ Go(func()) }, errc chan<- error) (stop func()) {
	wg.Go(func() {
		if err := b.bus.Run(ctx); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("bus: %w", err)
		}
	})
	if b.cdrClient == nil {
		return func() {}
	}
	cdr := goOwn(b.observeCDRs)
	return cdr.stop
}

// busEpoch is the WebSocket epoch: the stream generation's on the bus
// (every node the same), else "" (the hub picks a random one).
func (b *bridge) busEpoch() string {
	if b.bus == nil {
		return ""
	}
	return b.bus.Epoch()
}

// webhookSending is the webhooks' Sending on the bus: only the leading
// bridge sends (every node follows the same calls, and every bridge's
// recorder takes every CDR). Nil without the bus: always.
func (b *bridge) webhookSending(c serveConfig) func() bool {
	if b.bus == nil {
		return nil
	}
	if c.bus.edge && c.webhooks != "" {
		b.log.Warn("webhooks on an edge send nothing: only the leading bridge sends them")
	}
	return b.bus.Leading
}

// registerBus adds the bus node's figures to /metrics.
func (b *bridge) registerBus(reg prometheus.Registerer) {
	if b.bus != nil {
		reg.MustRegister(bus.NewCollector(b.bus))
	}
}

// closeBus closes the NATS connection (bridge.close).
func (b *bridge) closeBus() {
	if b.bus != nil {
		b.bus.Close()
	}
}
