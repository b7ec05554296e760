package pbxsim

import (
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// ChanSpy, as the REST start_spy (options qE: listen) and intrude (qEB:
// barge, talk to both) run it: an Originate of the supervisor's phone to
// Application ChanSpy with Data "<channel>,<options>". Once the phone
// answers, ChanSpyStart names spyer and spyee; when the spyee hangs up
// (option E) or the spyer does, ChanSpyStop. No audio is mixed: the
// supervisor's phone hears nothing.

// spyEvent is ChanSpyStart or ChanSpyStop. p.mu held.
func spyEvent(name string, spyer, spyee *channel) ami.Message {
	hs := amievent.Head(name, "call,all", 30)
	hs = chanHeaders(hs, "Spyer", spyer)
	hs = chanHeaders(hs, "Spyee", spyee)
	return ami.NewMessage(hs...)
}

// spyTarget is the live channel ChanSpy's first argument names: a whole
// channel name or its PJSIP/<endpoint> prefix. p.mu held.
func (p *PBX) spyTarget(spec string) *channel {
	for _, ch := range p.channels {
		if !ch.gone && ch.state == stateUp && (ch.name == spec || strings.HasPrefix(ch.name, spec+"-")) {
			return ch
		}
	}
	return nil
}

// chanSpy runs ChanSpy(data) on the answered channel s.
func (c *call) chanSpy(s *channel, data string) (*channel, string) {
	p := c.p
	spec, opts, _ := strings.Cut(data, ",")
	exitWithSpyee := strings.Contains(opts, "E")
	p.mu.Lock()
	s.app, s.appData = "ChanSpy", data
	spyee := p.spyTarget(spec)
	if spyee != nil {
		spyee.spies = append(spyee.spies, s)
		p.emit(spyEvent(ami.EventChanSpyStart, s, spyee))
	}
	p.mu.Unlock()

	max := time.NewTimer(p.cfg.MaxCallDuration)
	defer max.Stop()
	end := func(bye bool) (*channel, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if spyee != nil {
			p.emit(spyEvent(ami.EventChanSpyStop, s, spyee))
			spyee.dropSpy(s)
		}
		if bye {
			c.sendBye(s, true)
		}
		p.emitCdr(s, s.exten, nil, "ChanSpy", data, "ANSWERED")
		c.hangupChannel(s, 16, 0)
		return nil, ""
	}
	for {
		select {
		case e := <-c.events:
			switch {
			case e.ch != s:
			case e.kind == evSpyeeGone:
				if exitWithSpyee {
					return end(true)
				}
				p.mu.Lock()
				p.emit(spyEvent(ami.EventChanSpyStop, s, spyee))
				spyee = nil
				p.mu.Unlock()
			case e.kind == evBye || e.kind == evCancel || e.kind == evNoAck:
				return end(false)
			case e.kind == evHangup:
				return end(true)
			}
		case <-max.C:
			return end(true)
		case <-c.ctx.Done():
			return end(true)
		}
	}
}

// dropSpy forgets spy s of ch. p.mu held.
func (ch *channel) dropSpy(s *channel) {
	for i, x := range ch.spies {
		if x == s {
			ch.spies = append(ch.spies[:i], ch.spies[i+1:]...)
			return
		}
	}
}

// spyeeGone tells ch's spies that ch hung up. p.mu held.
func (ch *channel) spyeeGone() {
	for _, s := range ch.spies {
		s.call.post(callEvent{kind: evSpyeeGone, ch: s})
	}
	ch.spies = nil
}
