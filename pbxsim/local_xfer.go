package pbxsim

import "github.com/ctibridge/ctibridge/ami"

// Attended transfer (AMI Atxfer) on a call through a /n Local pair: the
// caller a talks to ;1, ;2 to the phone. Asterisk's bridging core treats
// the Local half in the transferer's bridge as any bridge peer
// (bridge_basic.c): it is the transferee, put on hold, and the consult
// runs as for a two-party call (atxfer.go). Completed, the target takes
// the transferer's place beside the pair, which is never optimised away
// (/n): the target and the party behind the pair talk through it. Failed,
// the transferer is back with the pair.

// localXfer is the call through a Local pair an attended transfer runs
// on; the call goes on through the pair when the transfer ends.
type localXfer struct {
	a      *channel
	w      *forkLeg
	target string
	ended  []*forkLeg
}

// far reports whether ch is a party of lx's call behind the pair (the
// caller or the phone), not the transferer t.
func (lx *localXfer) far(ch, t *channel) bool {
	return ch != t && (ch == lx.a || ch == lx.w.phone)
}

// atxferLocal starts the attended transfer by e.ch (a or w's phone) of
// the call through w.
func (c *call) atxferLocal(a *channel, w *forkLeg, e callEvent, target string, ended []*forkLeg) (*channel, string) {
	p := c.p
	p.mu.Lock()
	c.agentComplete(a, "transfer")
	c.q = nil
	p.mu.Unlock()
	c.lx = &localXfer{a: a, w: w, target: target, ended: ended}
	if e.ch == a {
		return c.atxfer(a, w.front, a, e.exten, e.context, target, a.dialData)
	}
	return c.atxfer(w.l2, w.phone, w.phone, e.exten, e.context, w.member, w.l2.dialData)
}

// resume goes on with the call once an attended transfer ended with a
// and b bridged: through the Local pair it ran on (talkLocal), with the
// target in the transferer's place when it completed; else as a
// two-party call.
func (c *call) resume(a, b *channel, target string) (*channel, string) {
	lx := c.lx
	if lx == nil {
		return c.talk(a, b, target)
	}
	c.lx = nil
	w := lx.w
	far, half := a, b
	if a == w.front || a == w.l2 {
		far, half = b, a
	}
	if half == w.front {
		return c.talkLocal(far, w, lx.target, lx.ended)
	}
	p := c.p
	p.mu.Lock()
	w.phone, w.br = far, far.bridge
	p.mu.Unlock()
	return c.talkLocal(lx.a, w, lx.target, lx.ended)
}

// consultGone: during the consult of a transfer through a Local pair,
// ch (the party behind the pair, or the transferer or the transferee
// when c.lx is nil) left; bye: ch's dialog needs our BYE. The consult
// ends, and the call with it.
func (c *call) consultGone(a, b *channel, x *consult, ch *channel, bye bool, target, lastData string) {
	lx := c.lx
	if lx == nil {
		c.consultDrop(x)
		c.hangupBridged(a, b, ch, 16, bye, target, lastData)
		return
	}
	c.lx = nil
	c.consultBack(x)
	c.hangupLocal(lx.a, lx.w, ch, 16, bye, lx.target, lx.ended)
}

// blondGone: a blonde transfer through a Local pair failed (the target
// did not answer, or the transferee's side left) after blondFailed hung
// up the transferee's half: its other half and the party behind it hang
// up too, as the pair's hangup takes them.
func (c *call) blondGone() {
	lx := c.lx
	if lx == nil {
		return
	}
	c.lx = nil
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	w := lx.w
	for _, pair := range [][2]*channel{{w.front, lx.a}, {w.l2, w.phone}} {
		half, party := pair[0], pair[1]
		if half.gone && !party.gone {
			continue // the transferee's side, gone with blondFailed
		}
		br := half.bridge
		if !half.gone {
			c.leave(half)
			c.hangupChannel(half, 16, 0)
		}
		if !party.gone {
			c.leave(party)
			if br != nil {
				p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
			}
			c.sendBye(party, true)
			c.hangupChannel(party, 16, 0)
		}
	}
}
