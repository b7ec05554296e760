package pbxsim

import (
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Call forwarding and do-not-disturb as FreePBX keeps them in AstDB and
// its dialplan honours them for a call to an extension: DND/<ext> = YES
// answers Busy (486, cause 17); CF/<ext> forwards every call
// (unconditional: the extension never rings; the callee channel keeps
// Exten <ext>, as call_forward_astdb shows); CFB/<ext> forwards when the
// extension is busy, CFU/<ext> when it is unavailable (no contact).

// dbValue reads AstDB.
func (p *PBX) dbValue(family, key string) (string, bool) {
	p.feat.mu.Lock()
	defer p.feat.mu.Unlock()
	v, ok := p.feat.db[family+"/"+key]
	return v, ok
}

// forwardTarget is where a forward stored under family for exten sends
// calls, if it names an extension with a contact.
func (p *PBX) forwardTarget(family, exten string) (string, bool) {
	to, ok := p.dbValue(family, exten)
	if !ok || to == "" || to == exten {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.exts[to]
	return to, e != nil && e.contact != nil || p.auto[to] || to == p.cfg.QueueNumber
}

// routeExten applies DND, CF and CFU for a call from a to extension
// target before it is dialled; routed is false when the call goes on to
// Dial (or to pbxsim's own answer when target has no contact).
func (c *call) routeExten(a *channel, target string, registered bool) (next *channel, to string, routed bool) {
	p := c.p
	if v, ok := p.dbValue("DND", target); ok && v == "YES" {
		c.busy(a, target)
		return nil, "", true
	}
	if to, ok := p.forwardTarget("CF", target); ok {
		next, to = c.forward(a, to, target)
		return next, to, true
	}
	if !registered {
		if to, ok := p.forwardTarget("CFU", target); ok {
			next, to = c.forward(a, to, target)
			return next, to, true
		}
	}
	return nil, "", false
}

// forward dials to on behalf of a call to target; a queue or auto-answer
// number runs its own dialplan instead.
func (c *call) forward(a *channel, to, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	e := p.exts[to]
	direct := e != nil && e.contact != nil && !p.auto[to]
	p.mu.Unlock()
	if !direct {
		return a, to
	}
	return c.dialTo(a, to, target)
}

// busy is Busy(): the caller gets 486 (cause 17) and a Cdr.
func (c *call) busy(a *channel, target string) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	a.app, a.appData = "Busy", "5"
	if a.context == "from-trunk" {
		a.context = p.cfg.Context
	}
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "17"))
	c.hangupChannel(a, 17, 0)
	p.cdrRecord(a, target, "", "Busy", "5", a.created, time.Time{}, p.cfg.Now(), "BUSY")
}

// forwardOnFailure is the CFB target of target when its Dial failed busy.
func (p *PBX) forwardOnFailure(target string, cause int) (string, bool) {
	if cause != 17 {
		return "", false
	}
	return p.forwardTarget("CFB", target)
}

// dialFailedForward ends the refused leg b of a's Dial; a goes on to the
// busy forward. p.mu not held.
func (c *call) dialFailedForward(a, b *channel, cause, tech int) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", dialStatus(cause)))
	c.hangupChannel(b, cause, tech)
}
