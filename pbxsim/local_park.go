package pbxsim

import (
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
)

// parkLocal: AMI Park of x, the caller a or the phone of leg w, on a
// call through w's Local pair (/n). As res_parking's Park action does, x
// alone moves from its bridge into the lot's; its bridge peer, the Local
// half left alone, hangs up, its other half with it, and the party
// behind that half, whose bridge dissolves on the hangup. The parker is
// that party (the TimeoutChannel the bridge sends).
func (c *call) parkLocal(a *channel, w *forkLeg, x *channel, target string, ended []*forkLeg) (*channel, string) {
	p := c.p
	l1, l2, b := w.front, w.l2, w.phone
	p.mu.Lock()
	c.agentComplete(a, "transfer")
	qc := c.q
	c.q = nil
	p.mu.Unlock()
	if x == b {
		return c.parkThen(b, l2, "PJSIP/"+a.endpoint, func() {
			now := p.cfg.Now()
			p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, now, "ANSWERED")
			p.emit(chanEvent(ami.EventHangupRequest, l1, "Cause", "16"))
			br1 := a.bridge
			c.leave(l1)
			c.hangupChannel(l1, 16, 0)
			c.leave(a)
			if br1 != nil {
				p.emit(bridgeEvent(ami.EventBridgeDestroy, br1, nil))
			}
			p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
			c.sendBye(a, true)
			c.q = qc // the caller's Cdrs are a queue call's
			c.localCallerCdrs(a, w, target, ended)
			c.q = nil
			c.hangupChannel(a, 16, 0)
		})
	}
	return c.parkThen(a, l1, "PJSIP/"+b.endpoint, func() {
		now := p.cfg.Now()
		// The legs that rang in vain are Cdrs of the caller's, reported
		// with the rest when it hangs up.
		for _, l := range sortLegs(ended) {
			a.cdrParts = append(a.cdrParts, cdrPart{destCh: l.front.name, data: a.dialData, start: a.created, end: l.ended, disposition: "NO ANSWER"})
		}
		p.emit(chanEvent(ami.EventHangupRequest, l2, "Cause", "16"))
		c.leave(l2)
		p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", strconv.Itoa(16)))
		c.hangupChannel(l2, 16, 0)
		p.cdrRecord(l2, w.member, b.name, "Dial", l2.dialData, l2.created, b.answered, now, "ANSWERED")
		c.leave(b)
		p.emit(bridgeEvent(ami.EventBridgeDestroy, w.br, nil))
		c.sendBye(b, true)
		c.hangupChannel(b, 16, 0)
	})
}
