package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/site"
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
	s.Str(&c.url, "bus", "", "NATS JetStream servers (nats://host:4222,...): share the PBX's state with other nodes (docs/scale-out.md)")
	s.Str(&c.pbx, "bus-pbx", "default", "name of the PBX on the bus (letters, digits, - and _): its stream and subjects")
	s.Bool(&c.edge, "bus-edge", false, "edge node: no AMI link, the state comes from the bus (ctibridge edge sets it)")
	s.Str(&c.node, "bus-node", "", "this node's name on the bus, unique per node (default host-pid)")
	s.Str(&c.prefer, "bus-prefer", "", "PBXs this bridge leads whenever it is up, by their names on the bus (--bus-pbx's for the PBX of --ami, --pbx names), comma-separated: a bridge leading one of them that does not prefer it hands it over (docs/operations.md)")
	s.List[len(s.List)-1].Repeat = true
	s.Int(&c.rollMiB, "bus-roll-mib", bus.DefaultRollBytes>>20, "the leader starts a new generation of the op log (a fresh resync; the old one purged) past this many MiB (0: never)")
	s.Dur(&c.rollAge, "bus-roll-age", bus.DefaultRollAge, "the leader starts a new generation of the op log when the current one is this old (0: never)")
	s.Dur(&c.yieldAfter, "bus-yield-after", bus.DefaultYieldAfter, "a leading bridge whose AMI link has been down this long hands the lead to a standby bridge that logs in to the PBX (0: never)")
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

// openBus builds the default PBX's bus node instead of a lone engine and
// link, and, with --pbx, each named PBX's (openSites); clients are served
// by replicas of the bus's op logs.
func (b *bridge) openBus(ctx context.Context, c *serveConfig, pc pbxConfigs) (err error) {
	b.client = nil // each candidate has its own (bus.Contender)
	def := site.Config{Name: c.bus.pbx, Engine: pc.defaultConfig(), Link: pc.link, AMI: pc.ami}
	if b.bus, err = site.OpenBus(ctx, busPBXConfig(c, b.log, def)); err != nil {
		return err
	}
	b.eng = b.bus.Engine()
	auth.SetOpaqueKey(b.bus.Node().OpaqueKey())
	b.sites, err = openSites(c, pc, b.bus.Node().State(), func(sc site.Config) (*site.Site, error) {
		bc := busPBXConfig(c, b.log, sc)
		bc.Named = true
		p, err := site.OpenBus(ctx, bc)
		if err != nil {
			return nil, err
		}
		return &site.Site{Name: sc.Name, Engine: p.Engine(), Bus: p}, nil
	})
	if err != nil {
		return fmt.Errorf("--pbx: %w", err)
	}
	return nil
}

// busPBXConfig is the bus configuration of the PBX sc names (its name on
// the bus), logging to log; with a CDR recorder (sc.Link.OnMessage) the
// PBX's CDR session feeds it.
func busPBXConfig(c *serveConfig, log *slog.Logger, sc site.Config) site.BusConfig {
	bc := site.BusConfig{Edge: c.bus.edge, Engine: sc.Engine, Link: sc.Link, AMI: sc.AMI, Observe: sc.Link.OnMessage,
		Node: bus.Config{URL: c.bus.url, PBX: sc.Name, Node: c.bus.node, Prefer: c.bus.prefers(sc.Name), YieldAfter: c.bus.yieldSetting(), Log: log}}
	var rc bus.Config
	c.bus.rollSettings(&rc)
	bc.RollBytes, bc.RollAge = rc.RollBytes, rc.RollAge
	return bc
}

// ready is what /readyz and systemd's READY say: the link is up and
// resynchronised, or, on the bus, the node follows and the state is live
// (each named PBX's too: site.Set.Ready).
func (b *bridge) ready() bool {
	if b.bus != nil {
		return b.bus.Node().Ready()
	}
	return b.link.Ready()
}

// busEpoch is the WebSocket epoch: on the bus with one PBX the stream
// generation's (every node the same, so a client resumes on any), else ""
// (the hub picks a random one). With several PBXs clients read the
// calls.Multi merge, whose seqs are this node's own.
func (b *bridge) busEpoch() string {
	if b.bus == nil || b.sites != nil {
		return ""
	}
	return b.bus.Node().Epoch()
}

// webhookPBXs are every PBX's engine for the webhooks, the default PBX's
// first; on the bus each says whether this node leads it (only the
// leading bridge of a PBX sends its events: every node follows the same
// calls, and every bridge's recorder takes every CDR).
func (b *bridge) webhookPBXs(c *serveConfig) []webhook.PBX {
	out := []webhook.PBX{{State: b.eng}}
	if b.bus != nil {
		out[0].Sending = b.bus.Leading
		if c.bus.edge && c.webhooks != "" {
			b.log.Warn("webhooks on an edge send nothing: only the leading bridge sends them")
		}
	}
	for _, s := range b.sites.All() {
		p := webhook.PBX{Name: s.Name, State: s.Engine}
		if s.Bus != nil {
			p.Sending = s.Bus.Leading
		}
		out = append(out, p)
	}
	return out
}

// registry is /metrics: the process's, the stores', auth's, the CDR
// recorder's and every PBX's figures (register).
func (b *bridge) registry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(storeCollector{b.stores}, authCollector{b.auth})
	if rec := b.stores.recorder; rec != nil {
		reg.MustRegister(history.NewCollector(rec))
	}
	return reg, b.register(reg)
}

// register adds the default PBX's figures to /metrics: its link's
// (ctibridge_ami_*, ctibridge_ready, the engine's) or on the bus its
// node's and candidate's (site.BusPBX.Collector), and each named PBX's
// (site.Set.Register), every series then labelled pbx="default" or
// pbx="<name>".
func (b *bridge) register(reg prometheus.Registerer) error {
	var c prometheus.Collector
	switch {
	case b.bus != nil:
		c = b.bus.Collector()
	case b.link != nil:
		c = link.NewCollector(b.link, b.client)
	default:
		return nil
	}
	if b.sites == nil {
		return reg.Register(c)
	}
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": calls.DefaultPBXName}, reg).Register(c); err != nil {
		return err
	}
	return b.sites.Register(reg)
}

// closeBus closes the NATS connections (bridge.close).
func (b *bridge) closeBus() {
	if b.bus != nil {
		b.bus.Close()
	}
	b.sites.Close()
}
