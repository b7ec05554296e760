package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/rest"
)

// Several PBXs in one process (docs/operations.md "Several PBXs"): the PBX
// of --ami is the default one, unchanged; each --pbx NAME=host:port adds a
// named PBX with its own AMI client, engine and link, and a calls.Multi
// merges the engines' states for rest and ws.

// pbxCreds is one named PBX's entry in the config file's pbxs section;
// what it leaves out is the default PBX's (--ami-user, --ami-secret,
// --ami-tls, --ami-md5).
type pbxCreds struct {
	AMIUser   string `yaml:"ami-user"`
	AMISecret string `yaml:"ami-secret"`
	AMITLS    *bool  `yaml:"ami-tls"`
	AMIMD5    *bool  `yaml:"ami-md5"`
	line      int
}

// pbxSettings adds --pbx and the file's pbxs section to s.
func pbxSettings(s *settings, c *serveConfig) {
	s.str(&c.pbx, "pbx", "", "another PBX followed by the same bridge, NAME=host:port (repeatable, or comma-separated; on a bus edge NAME alone); its ids are NAME:<id>; credentials and TLS in the config file's pbxs section (docs/operations.md)")
	s.list[len(s.list)-1].repeat = true
	if s.sections == nil {
		s.sections = map[string]func(*yaml.Node) error{}
	}
	s.sections["pbxs"] = func(n *yaml.Node) error {
		if n.Kind != yaml.MappingNode {
			return errors.New("want a mapping of PBX names to {ami-user, ami-secret, ami-tls, ami-md5}")
		}
		c.pbxCreds = map[string]pbxCreds{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			var pc pbxCreds
			dec := n.Content[i+1]
			if err := dec.Decode(&pc); err != nil {
				return fmt.Errorf("PBX %q: %w", n.Content[i].Value, err)
			}
			if err := knownKeys(dec, "ami-user", "ami-secret", "ami-tls", "ami-md5"); err != nil {
				return fmt.Errorf("PBX %q: %w", n.Content[i].Value, err)
			}
			pc.line = n.Content[i].Line
			c.pbxCreds[n.Content[i].Value] = pc
		}
		return nil
	}
}

func knownKeys(n *yaml.Node, keys ...string) error {
	if n.Kind != yaml.MappingNode {
		return errors.New("want a mapping")
	}
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i].Value
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			return fmt.Errorf("unknown key %q (line %d)", k, n.Content[i].Line)
		}
	}
	return nil
}

// checkUserPBXs reports each user endpoint qualified with a PBX name,
// and each name in a user's pbxs, that specs do not give (a PBX that is
// not followed).
func checkUserPBXs(specs []pbxSpec, users *auth.Users, bad func(user, key, pbx string)) {
	known := map[string]bool{calls.DefaultPBXName: true}
	for _, s := range specs {
		known[s.name] = true
	}
	for _, u := range users.All() {
		for _, e := range u.Endpoints {
			if pbx, _, ok := strings.Cut(e, string(calls.PBXSep)); ok && !known[pbx] {
				bad(u.Username, "endpoints", pbx)
			}
		}
		for _, pbx := range u.PBXs {
			if !known[pbx] {
				bad(u.Username, "pbxs", pbx)
			}
		}
	}
}

// pbxSpec is one named PBX, its credentials filled in.
type pbxSpec struct {
	name, addr, user, secret string
	tls, md5                 bool
}

// parsePBXs reads --pbx and the pbxs section. Every problem is an error:
// a bad or duplicate name, a bad address, credentials for a PBX --pbx
// does not name. A bus edge (--bus-edge) takes a name alone: it has no
// AMI link (an address given is checked, and not used, as --ami is not).
func parsePBXs(c serveConfig) ([]pbxSpec, error) {
	var out []pbxSpec
	seen := map[string]bool{}
	for _, item := range splitList(c.pbx) {
		name, addr, ok := strings.Cut(item, "=")
		if !ok && !c.bus.edge {
			return nil, fmt.Errorf("%q: want NAME=host:port (NAME alone: on a bus edge only, ctibridge edge)", item)
		}
		if err := calls.CheckPBXName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("PBX %q given twice", name)
		}
		seen[name] = true
		if err := checkHostPort(addr); ok && err != nil {
			return nil, fmt.Errorf("PBX %q: %w", name, err)
		}
		sp := pbxSpec{name: name, addr: addr, user: c.amiUser, secret: c.amiSecret, tls: c.amiTLS, md5: c.amiMD5}
		if pc, ok := c.pbxCreds[name]; ok {
			sp.user, sp.secret = cmp.Or(pc.AMIUser, sp.user), cmp.Or(pc.AMISecret, sp.secret)
			if pc.AMITLS != nil {
				sp.tls = *pc.AMITLS
			}
			if pc.AMIMD5 != nil {
				sp.md5 = *pc.AMIMD5
			}
		}
		out = append(out, sp)
	}
	for name, pc := range c.pbxCreds {
		if !seen[name] {
			return nil, fmt.Errorf("pbxs: line %d: PBX %q is not given by --pbx", pc.line, name)
		}
	}
	return out, nil
}

// site is one named PBX at work: its client (none on a bus edge), engine
// and link (none on a bus edge); on the bus, its node (bus.go).
type site struct {
	spec   pbxSpec
	client *ami.Client
	eng    *calls.Engine
	link   *link.Link
	bus    *busPBX // --bus; nil without it
}

// sites are the named PBXs and the combined state of all.
type sites struct {
	list  []*site
	multi *calls.Multi
	srcs  []calls.Source // the default engine first, then list's
}

// siteConfig is what a named PBX is built from: its AMI client's,
// engine's and link's configurations (pbxConfig's, logging pbx=NAME).
type siteConfig struct {
	ami  ami.Config
	eng  calls.Config
	link link.Config
}

// newSites builds the named PBXs specs (parsePBXs of c) next to the
// default engine def, nil when there are none, each with open (nil: the
// PBX's own client, engine and link, openSite; on the bus a node,
// bus.go); ecfg and lcfg are the default's engine and link
// configurations, before pbxConfig (the CDR recorder is shared, its ids
// qualified: qualifyCDRs). On error, the sites opened are closed.
func newSites(c serveConfig, specs []pbxSpec, def calls.Source, ecfg calls.Config, lcfg link.Config, log *slog.Logger, open func(pbxSpec, siteConfig) (*site, error)) (_ *sites, err error) {
	if len(specs) == 0 {
		return nil, nil
	}
	if open == nil {
		open = openSite
	}
	ss := &sites{srcs: []calls.Source{def}}
	defer func() {
		if err != nil {
			ss.close()
		}
	}()
	names := []string{""}
	known := specsKnown(specs)
	for _, sp := range specs {
		l := log.With("pbx", sp.name)
		sc := siteConfig{ami: amiConfig(c, l), eng: pbxConfig(ecfg, sp.name, known), link: lcfg}
		sc.ami.Addr, sc.ami.Username, sc.ami.Secret, sc.ami.MD5, sc.ami.TLS = sp.addr, sp.user, sp.secret, sp.md5, nil
		if sp.tls {
			host, _, _ := net.SplitHostPort(sp.addr)
			sc.ami.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		sc.eng.Log = l.With("component", "calls")
		sc.link.Log = l.With("component", "link")
		s, err := open(sp, sc)
		if err != nil {
			return nil, fmt.Errorf("PBX %s: %w", sp.name, err)
		}
		ss.list = append(ss.list, s)
		ss.srcs = append(ss.srcs, s.state())
		names = append(names, sp.name)
	}
	ss.multi = calls.NewMulti(int(c.wsReplay), names, ss.srcs)
	return ss, nil
}

// openSite builds a named PBX's own client, engine and link.
func openSite(sp pbxSpec, sc siteConfig) (*site, error) {
	s := &site{spec: sp, client: ami.NewClient(sc.ami)}
	s.eng = calls.New(sc.eng)
	if sc.link.OnMessage != nil {
		sc.link.OnMessage = qualifyCDRs(sp.name, s.eng, sc.link.OnMessage)
	}
	s.link = link.New(s.client, s.eng, sc.link)
	return s, nil
}

func specsKnown(specs []pbxSpec) func(string) bool {
	return func(n string) bool {
		return slices.ContainsFunc(specs, func(s pbxSpec) bool { return s.name == n })
	}
}

// defaultPBXConfig is the default PBX's engine configuration from ecfg
// (engineConfig's) when specs (parsePBXs's) name other PBXs: pbxConfig's
// for "".
func defaultPBXConfig(specs []pbxSpec, ecfg calls.Config) calls.Config {
	if len(specs) == 0 {
		return ecfg
	}
	return pbxConfig(ecfg, "", specsKnown(specs))
}

// pbxConfig is PBX pbx's engine configuration ("" the default PBX) from
// ecfg, made for all (engineConfig): the names and cellphones the users
// file gives its endpoints, which are written qualified for a named PBX
// ("site2:201"), by its own ids ("201"), so that a named PBX's extensions
// get their users' names and cellphones and the default PBX gets no
// extension "site2:201"; a ringing caller named for the rung extension's
// users by its combined id (calls.QualifyID), as they own it.
func pbxConfig(ecfg calls.Config, pbx string, known func(string) bool) calls.Config {
	ecfg.Names, ecfg.Cellphones = ofPBX(ecfg.Names, pbx, known), ofPBX(ecfg.Cellphones, pbx, known)
	if ring := ecfg.RingLookup; ring != nil && pbx != "" {
		ecfg.RingLookup = func(exten, number string) string { return ring(calls.QualifyID(pbx, exten), number) }
	}
	return ecfg
}

// ofPBX is m's entries whose keys are PBX pbx's combined ids, keyed by
// that PBX's own ids.
func ofPBX(m map[string]string, pbx string, known func(string) bool) map[string]string {
	out := make(map[string]string)
	for k, v := range m {
		if p, local := calls.SplitID(k, known); p == pbx {
			out[local] = v
		}
	}
	return out
}

// qualifyCDRs hands the history recorder a named PBX's messages with
// their Uniqueid and Linkedid qualified ("site2:1796028439.12"): the
// recorder's key is (uniqueid, sequence), and two PBXs' Uniqueids may be
// equal; the qualified ids also say which PBX a history row comes from.
// A CDR's source and destination are qualified when they are one of the
// PBX's extensions (eng's), as the users' endpoints are: a user's
// personal history matches them, so 201 of the default PBX does not see
// the calls of site2:201, and site2:201's user does.
func qualifyCDRs(pbx string, eng *calls.Engine, observe func(ami.Message)) func(ami.Message) {
	return func(m ami.Message) {
		for _, k := range []string{"UniqueID", "LinkedID"} { // header names are case-insensitive: Uniqueid too
			if v, ok := m.Lookup(k); ok && v != "" {
				m = m.Set(k, calls.QualifyID(pbx, v))
			}
		}
		if m.Event() == ami.EventCdr {
			exts := eng.Snapshot().Extensions
			for _, k := range []string{"Source", "Destination"} {
				if v := m.Get(k); v != "" {
					if _, ok := exts.Lookup(v); ok {
						m = m.Set(k, calls.QualifyID(pbx, v))
					}
				}
			}
		}
		observe(m)
	}
}

// restSites are the named PBXs as rest routes actions to them.
func (ss *sites) restSites() []rest.Site {
	if ss == nil {
		return nil
	}
	var out []rest.Site
	for _, s := range ss.list {
		if s.bus != nil { // to the PBX's leader, wherever it is
			out = append(out, rest.Site{Name: s.spec.name, State: s.state(), PBX: s.bus, Refresh: s.bus})
		} else {
			out = append(out, rest.Site{Name: s.spec.name, State: s.eng, PBX: s.client, Refresh: s.link})
		}
	}
	return out
}

// all is the named PBXs (none when ss is nil).
func (ss *sites) all() []*site {
	if ss == nil {
		return nil
	}
	return ss.list
}

// close closes the named PBXs' bus nodes (bridge.close).
func (ss *sites) close() {
	for _, s := range ss.all() {
		if s.bus != nil {
			s.bus.close()
		}
	}
}

// register registers the link metrics (ctibridge_ami_*, ctibridge_ready,
// the engine's) of the default PBX's link l and client (none on the
// bus, l nil: registerBus registers them) and, with named PBXs, of each,
// every series then labelled pbx="default" or pbx="<name>".
func (ss *sites) register(reg prometheus.Registerer, l *link.Link, client *ami.Client) error {
	if l == nil {
		return nil
	}
	if ss == nil {
		return reg.Register(link.NewCollector(l, client))
	}
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": calls.DefaultPBXName}, reg).Register(link.NewCollector(l, client)); err != nil {
		return err
	}
	for _, s := range ss.list {
		if s.link == nil { // a bus edge
			continue
		}
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": s.spec.name}, reg).Register(link.NewCollector(s.link, s.client)); err != nil {
			return err
		}
	}
	return nil
}

// len is how many named PBXs there are.
func (ss *sites) len() int {
	if ss == nil {
		return 0
	}
	return len(ss.list)
}

// ready: every named PBX's link is up and resynchronised (on the bus:
// its node follows and its state is live).
func (ss *sites) ready() bool {
	for _, s := range ss.all() {
		if s.bus != nil && !s.bus.node.Ready() || s.bus == nil && !s.link.Ready() {
			return false
		}
	}
	return true
}

// goLinks starts the named PBXs' links (on the bus their nodes: busPBX.run)
// and the merging of every PBX's state (each engine's followed by one
// goroutine) on wg with ctx, and their AMI clients (on the bus their CDR
// sessions) each with its own lifetime; the returned stop ends the
// clients, after ctx's goroutines are done.
func (ss *sites) goLinks(ctx context.Context, wg *sync.WaitGroup, errc chan<- error) (stop func()) {
	if ss == nil {
		return func() {}
	}
	var clients []*ownLifetime
	var stops []func()
	for _, s := range ss.list {
		if s.bus != nil {
			stops = append(stops, s.bus.run(ctx, wg, errc))
			continue
		}
		clients = append(clients, goOwn(func(ctx context.Context) { s.client.Run(ctx) }))
		wg.Go(func() {
			if err := s.link.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("link %s: %w", s.spec.name, err)
			}
		})
	}
	for i, src := range ss.srcs {
		wg.Go(func() { ss.follow(ctx, i, src) })
	}
	return func() {
		for _, c := range clients {
			c.stop()
		}
		for _, stop := range stops {
			stop()
		}
	}
}

// mergeEvery bounds how late a duration refresh reaches the combined
// state: a refresh appends nothing to the feed, so only this tick sees it.
const mergeEvery = 250 * time.Millisecond

// follow merges engine i's state into the combined one after each of its
// publishes, when its node's own say changes (a bus node that cannot
// hear its stream or whose leader's heartbeat is late: bus.State), and
// every mergeEvery.
func (ss *sites) follow(ctx context.Context, i int, src calls.Source) {
	t := time.NewTicker(mergeEvery)
	defer t.Stop()
	local, _ := src.(interface{ LocalChanged() <-chan struct{} })
	for {
		wake := src.Feed().Wait()
		var said <-chan struct{}
		if local != nil {
			said = local.LocalChanged()
		}
		ss.multi.Sync(i)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-said:
		case <-t.C:
		}
	}
}
