package pbxsim

import (
	"fmt"
	"slices"
	"strings"
)

// Dialplans of Config.Plan.
const (
	PlanDefault = "default"
	PlanFreePBX = "freepbx"
)

// Defaults of the freepbx plan, as the third set of recordings' PBX
// (ringgroup_local, queue_local_members, multi_device_user).
const (
	DefaultRingGroup     = "610"
	DefaultFreePBXQueue  = "620"
	DefaultDIDPrefix     = "0612340"
	outboundMinDigits    = 5 // a shorter unknown number is no outside number
	contextFromQueue     = "from-queue"
	contextFromPSTN      = "from-pstn"
	contextExtQueues     = "ext-queues"
	contextMacroDial     = "macro-dial"
	contextMacroDialOne  = "macro-dial-one"
	contextMacroDialout  = "macro-dialout-trunk"
	contextOutboundCIDFn = "macro-outbound-callerid"
	contextMacroVM       = "macro-vm"
)

// planDefaults validates Plan and fills the freepbx plan's defaults,
// before the plan-independent ones (the queue's name and number).
func (c *Config) planDefaults() error {
	switch c.Plan {
	case "", PlanDefault:
		c.Plan = PlanDefault
		return nil
	case PlanFreePBX:
	default:
		return fmt.Errorf("pbxsim: plan %q: want %s or %s", c.Plan, PlanDefault, PlanFreePBX)
	}
	if c.RingGroup == "" {
		c.RingGroup = DefaultRingGroup
	}
	if c.RingGroupMembers == nil {
		c.RingGroupMembers = []string{"202", "203", "204"}
	}
	if c.RingGroupVoicemail == "" && len(c.RingGroupMembers) > 0 {
		c.RingGroupVoicemail = c.RingGroupMembers[0]
	}
	if c.Devices == nil {
		c.Devices = map[string]string{"91201": "201"}
	}
	if c.DIDPrefix == "" {
		c.DIDPrefix = DefaultDIDPrefix
	}
	if c.Queue == "" {
		c.Queue = DefaultFreePBXQueue
	}
	if c.QueueNumber == "" {
		c.QueueNumber = DefaultFreePBXQueue
	}
	if c.QueueMembers == nil {
		c.QueueMembers = []string{"202", "203"}
	}
	known := map[string]bool{}
	for _, e := range c.Extensions {
		known[e.Number] = true
	}
	for dev, user := range c.Devices {
		if dev == "" || dev == user || known[dev] {
			return fmt.Errorf("pbxsim: device %q of user %q", dev, user)
		}
		if _, isDev := c.Devices[user]; isDev {
			return fmt.Errorf("pbxsim: device %q: its user %q is a device", dev, user)
		}
	}
	return nil
}

// freepbx reports whether the PBX runs the freepbx plan.
func (p *PBX) freepbx() bool { return p.cfg.Plan == PlanFreePBX }

// addDevices makes each device an endpoint of its user (its phone
// registers as the device, its calls show the user's caller ID) and
// loads FreePBX's AstDB keys for them: AMPUSER/<user>/device and
// DEVICE/<dev>/user, as the bridge reads them. Called by New.
func (p *PBX) addDevices() {
	if !p.freepbx() {
		return
	}
	devs := map[string][]string{}
	for dev, user := range p.cfg.Devices {
		u := p.exts[user]
		if u == nil {
			continue
		}
		devs[user] = append(devs[user], dev)
		p.exts[dev] = &ext{num: dev, name: u.name, user: user, chans: map[*channel]struct{}{}, dev: devUnavailable, hint: devUnavailable}
		p.names[dev] = u.name
	}
	for num, e := range p.exts {
		if e.user != "" {
			p.feat.db["DEVICE/"+num+"/user"] = e.user
			continue
		}
		ds := devs[num]
		slices.Sort(ds)
		e.devices = ds
		p.feat.db["AMPUSER/"+num+"/device"] = strings.Join(append([]string{num}, ds...), "&")
		p.feat.db["DEVICE/"+num+"/user"] = num
	}
}

// freepbxRoute runs the freepbx plan's own destinations for a's call to
// target: the ring group and outside numbers (the outbound route).
// routed is false for what the common plan handles (extensions, with a
// user's devices, the queue, features).
func (c *call) freepbxRoute(a *channel, target string) (next *channel, to string, routed bool) {
	p := c.p
	if !p.freepbx() {
		return nil, "", false
	}
	p.mu.Lock()
	outside := p.exts[target] == nil && !p.auto[target] && target != p.cfg.QueueNumber && isOutsideNumber(target)
	p.mu.Unlock()
	switch {
	case p.ringGroupMembers(target) != nil:
		next, to = c.ringGroup(a, target)
		return next, to, true
	case outside:
		next, to = c.dialOut(a, target)
		return next, to, true
	}
	return nil, "", false
}

// userDevices is the registered endpoints of user target, its own and
// its devices' (macro-dial-one's PJSIP_DIAL_CONTACTS), when it has
// devices (the freepbx plan); nil otherwise.
func (p *PBX) userDevices(target string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.exts[target]
	if e == nil || len(e.devices) == 0 {
		return nil
	}
	var out []string
	for _, n := range append([]string{target}, e.devices...) {
		if d := p.exts[n]; d != nil && d.contact != nil {
			out = append(out, n)
		}
	}
	return out
}

// ringGroup is FreePBX's ext-group: Dial(Local/<m>@from-internal/n&...)
// of every member that has a contact.
func (c *call) ringGroup(a *channel, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	var members []string
	for _, m := range p.ringGroupMembers(target) {
		if e := p.exts[m]; e != nil && e.contact != nil && m != a.cidNum {
			members = append(members, m)
		}
	}
	p.mu.Unlock()
	if len(members) == 0 {
		return c.answerLocal(a, target)
	}
	return c.fork(a, target, members, true)
}

// ringGroupMembers is the members of ring group n (RingGroup or one of
// RingGroups), nil when n is none.
func (p *PBX) ringGroupMembers(n string) []string {
	if n == p.cfg.RingGroup {
		return p.cfg.RingGroupMembers
	}
	return p.cfg.RingGroups[n]
}

// localOpts is the ring group's Local dial options: "/n" (never
// optimised), or none with RingGroupOptimize.
func (p *PBX) localOpts() string {
	if p.cfg.RingGroupOptimize {
		return ""
	}
	return "/n"
}

// isOutsideNumber reports whether n looks like a number an outbound
// route takes: digits only (a leading + allowed), long enough.
func isOutsideNumber(n string) bool {
	d := strings.TrimPrefix(n, "+")
	if len(d) < outboundMinDigits {
		return false
	}
	for _, r := range d {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// didTarget is where the freepbx plan sends a trunk call to did: the
// number after the DID prefix when it is one of ours, did otherwise.
func (p *PBX) didTarget(did string) string {
	if !p.freepbx() {
		return did
	}
	n, ok := strings.CutPrefix(did, p.cfg.DIDPrefix)
	if !ok || n == "" {
		return did
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exts[n] != nil || n == p.cfg.QueueNumber || p.ringGroupMembers(n) != nil || p.auto[n] {
		return n
	}
	return did
}

// trunkContext is the context of a call arriving on the trunk.
func (p *PBX) trunkContext() string {
	if p.freepbx() {
		return contextFromPSTN
	}
	return "from-trunk"
}
