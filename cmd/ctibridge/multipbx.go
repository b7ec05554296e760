package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/site"
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
	s.Str(&c.pbx, "pbx", "", "another PBX followed by the same bridge, NAME=host:port (repeatable, or comma-separated; on a bus edge NAME alone); its ids are NAME:<id>; credentials and TLS in the config file's pbxs section (docs/operations.md)")
	s.List[len(s.List)-1].Repeat = true
	if s.Sections == nil {
		s.Sections = map[string]func(*yaml.Node) error{}
	}
	s.Sections["pbxs"] = func(n *yaml.Node) error {
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
func parsePBXs(c *serveConfig) ([]pbxSpec, error) {
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

// pbxConfigs is what every PBX of the bridge is built from: the named
// PBXs (parsePBXs's) and the default PBX's engine, link and AMI client
// configurations, the engine's before site.PBXConfig (the CDR recorder,
// the link's OnMessage, is shared, a named PBX's ids qualified:
// site.QualifyCDRs).
type pbxConfigs struct {
	specs []pbxSpec
	eng   calls.Config
	link  link.Config
	ami   ami.Config
	log   *slog.Logger
}

// known says whether a name is a named PBX's.
func (pc pbxConfigs) known(n string) bool {
	return slices.ContainsFunc(pc.specs, func(s pbxSpec) bool { return s.name == n })
}

// defaultConfig is the default PBX's engine configuration: when there
// are named PBXs, site.PBXConfig's for "".
func (pc pbxConfigs) defaultConfig() calls.Config {
	if len(pc.specs) == 0 {
		return pc.eng
	}
	return site.PBXConfig(pc.eng, "", pc.known)
}

// openSites builds the named PBXs next to the default PBX's state def,
// nil when there are none, each with open (nil: the PBX's own client,
// engine and link, site.Open; on the bus a node, bus.go). On error, the
// sites opened are closed.
func openSites(c *serveConfig, pc pbxConfigs, def calls.Source, open func(site.Config) (*site.Site, error)) (*site.Set, error) {
	var list []*site.Site
	for _, sp := range pc.specs {
		s, err := openNamed(c, pc, sp, open)
		if err != nil {
			for _, s := range list {
				if s.Bus != nil {
					s.Bus.Close()
				}
			}
			return nil, fmt.Errorf("PBX %s: %w", sp.name, err)
		}
		list = append(list, s)
	}
	return site.NewSet(def, list, int(c.wsReplay)), nil
}

// openNamed opens the named PBX sp with open (nil: site.Open), each of
// its components logging pbx=NAME.
func openNamed(c *serveConfig, pc pbxConfigs, sp pbxSpec, open func(site.Config) (*site.Site, error)) (*site.Site, error) {
	l := pc.log.With("pbx", sp.name)
	sc := site.Config{Name: sp.name, AMI: amiConfig(c, l), Engine: site.PBXConfig(pc.eng, sp.name, pc.known), Link: pc.link}
	sc.AMI.Addr, sc.AMI.Username, sc.AMI.Secret, sc.AMI.MD5, sc.AMI.TLS = sp.addr, sp.user, sp.secret, sp.md5, nil
	if sp.tls {
		host, _, _ := net.SplitHostPort(sp.addr)
		sc.AMI.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	sc.Engine.Log = l.With("component", "calls")
	sc.Link.Log = l.With("component", "link")
	if open == nil {
		return site.Open(sc), nil
	}
	return open(sc)
}

// restSites are the named PBXs as rest routes actions to them.
func restSites(ss *site.Set) []rest.Site {
	var out []rest.Site
	for _, s := range ss.All() {
		if s.Bus != nil { // to the PBX's leader, wherever it is
			out = append(out, rest.Site{Name: s.Name, State: s.State(), PBX: s.Bus, Refresh: s.Bus})
		} else {
			out = append(out, rest.Site{Name: s.Name, State: s.Engine, PBX: s.Client, Refresh: s.Link})
		}
	}
	return out
}
