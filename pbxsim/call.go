package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/emiago/sipgo/sip"
)

// A call is one goroutine (an actor) that owns a set of channels from the
// first INVITE (or Originate) until the last channel hangs up. SIP handlers,
// which sipgo runs each in its own goroutine and in any order (a BYE may
// come before the ACK), and AMI actions never touch a call's channels
// themselves: they post a callEvent and the actor applies it, emitting the
// AMI events of each step under PBX.mu.
type call struct {
	p      *PBX
	events chan callEvent
	done   chan struct{} // closed when the actor returns
	ctx    context.Context
	cancel context.CancelFunc
	sipWG  sync.WaitGroup // SIP helper goroutines (outgoing INVITEs, BYEs)
	q      *queueConn     // a queue caller bridged with a member; guarded by PBX.mu
	lx     *localXfer     // an attended transfer through a Local pair; the actor's own
}

type evKind int

const (
	evResponse  evKind = iota // a provisional or 2xx response to our INVITE to ch
	evFail                    // our INVITE to ch got a final failure (res may be nil)
	evCancel                  // ch's caller sent CANCEL
	evBye                     // ch sent BYE (already answered 200)
	evHangup                  // AMI Hangup of ch
	evRedirect                // AMI Redirect (or BlindTransfer) of ch
	evPark                    // AMI Park of ch
	evHold                    // ch put its peer on hold (re-INVITE)
	evUnhold                  // ch took it off hold
	evNoAck                   // our 2xx to ch was never acknowledged
	evUnpark                  // another call retrieves parked ch
	evPickup                  // other (the picker) picks up ringing ch
	evSpyeeGone               // the channel spy ch listens to hung up
	evAtxfer                  // AMI Atxfer by ch to exten@context
)

type callEvent struct {
	kind    evKind
	ch      *channel
	res     *sip.Response
	cause   int
	context string
	exten   string
	other   *channel  // BlindTransfer: the transferer; Park: the parker; Pickup: the picker
	to      *call     // evUnpark, evPickup: the call taking ch (or giving other) over
	reply   chan bool // evUnpark, evPickup: whether the hand-over happened
	before  func()    // evRedirect by REFER: the final NOTIFY, sent by the call before it transfers
}

func (p *PBX) newCall() *call {
	ctx, cancel := context.WithCancel(context.Background())
	return &call{p: p, events: make(chan callEvent, 32), done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// post hands an event to the actor without ever blocking the caller for
// long: SIP and AMI goroutines must not wait on a busy call.
func (c *call) post(e callEvent) {
	select {
	case c.events <- e:
	case <-c.done:
	default:
		go func() {
			select {
			case c.events <- e:
			case <-c.done:
			}
		}()
	}
}

// finish waits for the SIP helpers and releases the call.
func (c *call) finish() {
	c.cancel()
	c.sipWG.Wait()
	close(c.done)
}

// goSIP runs a SIP exchange (BYE, CANCEL...) owned by the call.
func (c *call) goSIP(f func(ctx context.Context)) {
	c.sipWG.Add(1)
	go func() {
		defer c.sipWG.Done()
		ctx, cancel := context.WithTimeout(c.p.sipCtx, 40*time.Second)
		defer cancel()
		f(ctx)
	}()
}

// startSrvQueue starts the goroutine that performs, in order, what is
// sent on ch's server dialog: sipgo's DialogServerSession is not safe for
// concurrent responses, a 180 must precede the 200, and a BYE must wait for
// the ACK of our 200 (RFC 3261 §15). It ends at ch's Hangup, once what was
// queued is done, and only then forgets ch's dialog.
func (c *call) startSrvQueue(ch *channel) {
	q := make(chan func(context.Context), 16)
	ch.srvQ = q
	c.sipWG.Add(1)
	go func() {
		defer c.sipWG.Done()
		for f := range q {
			ctx, cancel := context.WithTimeout(c.p.sipCtx, 40*time.Second)
			f(ctx)
			cancel()
		}
		// The dialog stays findable until its last operation is done: a
		// BYE sent right after our 200 waits for the ACK (handleAck).
		c.p.mu.Lock()
		if c.p.dialogs[ch.dialogID] == ch {
			delete(c.p.dialogs, ch.dialogID)
		}
		c.p.mu.Unlock()
	}()
}

// srvDo queues f for ch's server dialog. p.mu held; it never blocks for
// long (a channel gets a handful of operations).
func (c *call) srvDo(ch *channel, f func(context.Context)) {
	if ch.srvQ == nil {
		return // hung up: its dialog is over
	}
	ch.srvQ <- f
}

// run executes the dialplan for channel a until every channel of the call
// has hung up. A Redirect starts it again on the redirected channel.
func (c *call) run(a *channel, target string) {
	for a != nil {
		a, target = c.execute(a, target)
	}
}

// execute runs one dialplan step for a: dial an extension, answer, or
// refuse. It returns the channel and extension to continue with after a
// redirect, or nil when the call is over.
func (c *call) execute(a *channel, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	e := p.exts[target]
	registered := e != nil && e.contact != nil
	p.mu.Unlock()
	if space, err := strconv.Atoi(target); err == nil && space >= parkFirst && space <= parkLast {
		return c.retrieve(a, space)
	}
	if target == confNumber {
		return c.confBridge(a)
	}
	if ext, ok := strings.CutPrefix(target, "**"); ok && ext != "" {
		return c.pickup(a, ext, "") // _**20X: Pickup(20X@from-internal)
	}
	if box, ok := p.directMailbox(target); ok {
		return c.voicemailDirect(a, box) // vmu<ext>, *<ext>: vmdirect.go
	}
	if next, tgt, routed := c.freepbxRoute(a, target); routed {
		return next, tgt
	}
	switch {
	case target == p.cfg.QueueNumber:
		return c.queueCall(a, target)
	case e != nil && !p.auto[target]:
		if next, tgt, routed := c.routeExten(a, target, registered); routed {
			return next, tgt
		}
		p.mu.Lock()
		c.recordCheck(a, "internal", target) // macro-exten-vm's checkrecord
		p.mu.Unlock()
		switch devs := p.userDevices(target); {
		case len(devs) > 1:
			return c.fork(a, target, devs, false)
		case len(devs) == 1 && devs[0] != target:
			return c.dialTo(a, devs[0], target) // only a device is registered
		}
		if registered {
			return c.dial(a, target)
		}
		return c.answerLocal(a, target)
	case p.auto[target]:
		return c.answerLocal(a, target)
	}
	p.mu.Lock()
	a.priority = 1
	c.hangupChannel(a, 1, 0)
	p.mu.Unlock()
	return nil, ""
}

// answerLocal is Answer() + Wait(): pbxsim itself is the far end.
func (c *call) answerLocal(a *channel, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	a.app, a.appData = "Wait", strconv.Itoa(int(p.cfg.MaxCallDuration/time.Second))
	a.priority = 2
	if a.context == "from-trunk" {
		a.context = p.cfg.Context
	}
	a.progressed = true
	c.answer(a, p.sdp(p.chanSeq, false))
	p.stats.Answered++
	p.mu.Unlock()
	max := time.NewTimer(p.cfg.MaxCallDuration)
	defer max.Stop()
	for {
		select {
		case e := <-c.events:
			switch e.kind {
			case evBye, evHangup, evCancel, evNoAck:
				if e.ch != a {
					continue
				}
				p.mu.Lock()
				cause := strconv.Itoa(hangupCause(e.kind))
				p.emit(chanEvent(ami.EventHangupRequest, a, "Cause", cause))
				c.sendBye(a, e.kind != evBye)
				p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", cause))
				p.emitCdr(a, target, nil, "Wait", a.appData, "ANSWERED")
				c.hangupChannel(a, 16, 0)
				p.mu.Unlock()
				return nil, ""
			case evRedirect:
				if e.ch == a {
					p.mu.Lock()
					a.context, a.exten, a.priority = e.context, e.exten, 1
					p.mu.Unlock()
					return a, e.exten
				}
			case evPark:
				if e.ch == a {
					return c.park(a, nil)
				}
			}
		case <-max.C:
			p.mu.Lock()
			c.sendBye(a, true)
			c.hangupChannel(a, 16, 0)
			p.mu.Unlock()
			return nil, ""
		case <-c.ctx.Done():
			p.mu.Lock()
			c.sendBye(a, true)
			c.hangupChannel(a, 16, 0)
			p.mu.Unlock()
			return nil, ""
		}
	}
}

// answer answers channel a: Newstate Up and, for an inbound SIP caller,
// the 200 OK with body (in the background: sipgo's RespondSDP waits for
// the ACK). p.mu held.
func (c *call) answer(a *channel, body []byte) {
	p := c.p
	if a.state != stateUp {
		a.state = stateUp
		a.answered = p.cfg.Now()
		p.emit(chanEvent(ami.EventNewstate, a))
		p.updateDevice(a.endpoint)
	}
	if a.srv != nil && !a.srvAnswered {
		a.srvAnswered = true
		a.sdpSent = body
		srv := a.srv
		c.srvDo(a, func(context.Context) {
			err := srv.RespondSDP(body)
			// The dialog's context ends when it ends (a BYE either way),
			// and stays ended: its state does not, since sipgo's ReadAck
			// confirms a dialog even after a BYE ended it (an ACK handled
			// after the BYE that followed it, seen under -race).
			if err != nil && srv.Context().Err() == nil {
				// The 200 was retransmitted until the INVITE transaction
				// ended (64*T1) without ACK: PJSIP ends the session with
				// BYE and cause 408, which chan_pjsip reports as 18.
				p.mu.Lock()
				a.noAck = true
				p.mu.Unlock()
				c.post(callEvent{kind: evNoAck, ch: a})
			}
		})
	}
}
