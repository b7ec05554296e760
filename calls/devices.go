package calls

import "strings"

// Users with several devices. FreePBX in device-and-user mode, and
// NethVoice with its 9X<exten> devices (91201 a second desk phone of
// user 201, 92201 her WebRTC phone), ring every registered device of a
// user at once and give each the user's caller ID; the AstDB says which
// devices are whose (DEVICE/<device>/user). A device's channels belong
// to its user's extension: their conversations are the user's, shown
// under her number and name, so a call answered on 91201 is one call
// with Alice 201, not one with an extension 91201. The device keeps an
// extension of its own for what is its own (registration, address, its
// device state), named after the user when nothing names it. The user's
// status is her devices' together (as her hint is), so her presence is
// busy while any of them is in a call.

// setDevice records that endpoint dev is a device of user's extension
// ("" user: it is no one's device). A user's own endpoint is no device,
// and a device cannot have devices. Channels of dev already up move to
// their new owner.
func (e *Engine) setDevice(dev, user string) {
	if dev == user {
		user = ""
	}
	if user != "" && (!validDevice(dev) || !validDevice(user) || e.devUser[user] != "" || len(e.userDevs[dev]) > 0) {
		e.stats.BadValues++ // not an endpoint, or a device's device
		return
	}
	old := e.devUser[dev]
	if old == user {
		return
	}
	if old != "" {
		e.userDevs[old] = removeString(e.userDevs[old], dev)
		e.dirtyExt[old] = struct{}{}
	}
	if user == "" {
		delete(e.devUser, dev)
	} else {
		if e.devUser == nil {
			e.devUser, e.userDevs = map[string]string{}, map[string][]string{}
		}
		dev, user = strings.Clone(dev), strings.Clone(user)
		e.devUser[dev] = user
		e.userDevs[user] = append(e.userDevs[user], dev)
		if e.exts[user] == nil {
			e.ensureExt(user).status = "offline" // until the PBX says
		}
	}
	if e.exts[dev] != nil {
		e.dirtyExt[dev] = struct{}{}
	}
	e.reown(dev)
}

// validDevice: an endpoint name as FreePBX writes them (digits), at most
// 32 bytes.
func validDevice(s string) bool { return len(s) <= 32 && allDigits(s) }

func removeString(s []string, v string) []string {
	for i, x := range s {
		if x == v {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// ownerOf is the extension that owns the channels of endpoint ep (its
// extension x, nil when not made yet): its user's, for a device.
func (e *Engine) ownerOf(ep string, x *extState) *extState {
	if u := e.devUser[ep]; u != "" {
		return e.ensureExt(u)
	}
	return e.extFound(x, ep)
}

// reown gives the channels of endpoint dev that are up to the extension
// that owns them now.
func (e *Engine) reown(dev string) {
	to := e.ownerOf(dev, e.exts[dev])
	for _, c := range e.chans {
		if c.gone || c.kind != ownerExt || c.owner == to.exten {
			continue
		}
		if _, ep := splitChannel(c.name); ep != dev {
			continue
		}
		if from := e.exts[c.owner]; from != nil {
			if from.chans = removeOwned(from.chans, c); len(from.chans) == 0 {
				delete(e.busyExt, from.exten)
			}
			e.dirtyExt[from.exten] = struct{}{}
		}
		c.owner = to.exten
		to.chans = addOwned(to.chans, c)
		e.busyExt[to.exten] = to
		e.changed(c)
	}
}

// devicesDirty marks the users of the dirty devices dirty: a device's
// status is part of its user's.
func (e *Engine) devicesDirty() {
	if len(e.devUser) == 0 {
		return
	}
	for k := range e.dirtyExt {
		if u := e.devUser[k]; u != "" {
			e.dirtyExt[u] = struct{}{}
		}
	}
}

// userStatus is x's status together with its devices', as Asterisk
// joins the device states of a hint: ringing and in use is
// busy_ringing; then ringing, busy, on hold; online when any device is;
// offline when none is.
func (e *Engine) userStatus(x *extState) string {
	devs := e.userDevs[x.exten]
	if len(devs) == 0 {
		return x.status
	}
	var ring, busy, hold, online bool
	add := func(st string) {
		switch st {
		case "busy_ringing":
			ring, busy = true, true
		case "ringing":
			ring = true
		case "busy":
			busy = true
		case "onhold":
			hold = true
		case "online", "dnd":
			online = true
		}
	}
	add(x.status)
	for _, d := range devs {
		if dx := e.exts[d]; dx != nil {
			add(dx.status)
		}
	}
	switch {
	case ring && busy:
		return "busy_ringing"
	case ring:
		return "ringing"
	case busy:
		return "busy"
	case hold:
		return "onhold"
	case online:
		return "online"
	}
	return "offline"
}

// extName is x's display name, its user's for a device nothing names.
func (e *Engine) extName(x *extState) string {
	if n := x.displayName(); n != "" {
		return n
	}
	if u := e.exts[e.devUser[x.exten]]; u != nil {
		return u.displayName()
	}
	return ""
}
