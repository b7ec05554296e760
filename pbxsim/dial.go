package pbxsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/ctibridge/ctibridge/ami"
)

// dial is Dial(PJSIP/<target>,<ring timeout>,tT) from channel a.
func (c *call) dial(a *channel, target string) (*channel, string) {
	return c.dialTo(a, target, target)
}

// newLeg creates and announces the channel a dials to endpoint (Dial or
// app_queue's ring_entry: AppDial, a's Linkedid) and returns it with
// endpoint's contact. Like chan_pjsip's, it starts with no account code:
// the caller gives it a's afterwards (setAccountCode). p.mu held;
// endpoint has a contact.
func (c *call) newLeg(a *channel, endpoint string) (*channel, contact) {
	p := c.p
	ct := *p.exts[endpoint].contact
	b := p.newChannel(c, endpoint)
	b.dialler = a
	b.linkedid = a.linkedid
	b.exten = "s"
	b.app, b.appData = "AppDial", "(Outgoing Line)"
	b.tcp = ct.tcp
	p.emit(chanEvent(ami.EventNewchannel, b))
	return b, ct
}

// dialTo is Dial(PJSIP/<endpoint>,<ring timeout>,tT) for a call to target
// (they differ when target forwards to endpoint: the callee's Exten and
// the Cdr's Destination stay target). endpoint has a contact.
func (c *call) dialTo(a *channel, endpoint, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	b, ct := c.newLeg(a, endpoint)
	if a.context == "from-trunk" {
		a.context = p.cfg.Context // Goto(from-internal,${EXTEN},1)
	}
	a.priority = 2
	a.app, a.appData = "Dial", "PJSIP/"+endpoint+","+strconv.Itoa(int(p.cfg.RingTimeout/time.Second))+",tT"
	a.dialled, a.dialData = target, a.appData
	b.exten = target
	b.conNum, b.conName = a.cidNum, a.cidName
	p.setAccountCode(b, a.accountCode) // app_dial's ast_channel_req_accountcodes
	p.emit(chanEvent(ami.EventNewConnectedLine, b))
	ds := endpoint
	if p.freepbx() {
		ds += "/" + ct.uri.String() // macro-dial-one dials the contact
	}
	p.emit(dialEvent(ami.EventDialBegin, a, b, "DialString", ds))
	a.conNum, a.conName = b.cidNum, b.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, a))
	offer := a.sdp // the caller's media; one already up is re-INVITEd at the answer (mediaTo)
	if len(offer) == 0 {
		offer = p.sdp(p.chanSeq, false)
	}
	c.invite(b, ct, a.cidNum, a.cidName, offer)
	p.mu.Unlock()

	ring := time.NewTimer(p.cfg.RingTimeout)
	defer ring.Stop()
	// amiCause: the cause of an AMI Hangup of the ringing callee, which
	// Dial passes on to the caller (app_dial's wait_for_answer).
	amiCause := 0
	for {
		select {
		case e := <-c.events:
			switch {
			case e.kind == evResponse && e.ch == b && e.res.IsProvisional():
				c.calleeRinging(a, b)
			case e.kind == evResponse && e.ch == b:
				return c.bridgeCall(a, b, target, e.res)
			case e.kind == evPickup && e.ch == b:
				if next, tgt := c.pickedUp(a, b, target, e); next != nil || b.gone {
					return next, tgt
				}
			case e.kind == evResponse && e.res.IsSuccess():
				c.byeStale(e.ch)
			case e.kind == evFail && e.ch == b:
				cause := 127
				tech := 0
				if e.res != nil {
					tech = e.res.StatusCode
					cause = sipToCause(tech)
				}
				if amiCause != 0 {
					cause, tech = amiCause, 0
				}
				if fwd, ok := p.forwardOnFailure(target, cause); ok {
					c.dialFailedForward(a, b, cause, tech)
					return a, fwd
				}
				if cause == 17 && p.hasMailbox(target) {
					return c.toVoicemail(a, b, target, cause, tech)
				}
				c.dialFailed(a, b, target, cause, tech)
				return nil, ""
			case (e.kind == evHangup || e.kind == evNoAck) && e.ch == b:
				if e.kind == evHangup {
					amiCause = cmp.Or(e.cause, 16)
				}
				p.mu.Lock()
				b.cancelCli()
				p.mu.Unlock()
			case (e.kind == evCancel || e.kind == evBye || e.kind == evHangup || e.kind == evNoAck) && e.ch == a:
				c.callerGone(a, b, target, e.kind)
				return nil, ""
			}
		case <-ring.C:
			if p.hasMailbox(target) {
				return c.toVoicemail(a, b, target, 19, 0)
			}
			c.dialFailed(a, b, target, 19, 0)
			return nil, ""
		case <-c.ctx.Done():
			c.callerGone(a, b, target, evHangup)
			return nil, ""
		}
	}
}

// calleeRinging: callee b's phone rings (its first provisional answer);
// caller a hears it (180) unless it is up already.
func (c *call) calleeRinging(a, b *channel) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.state == stateRinging || b.state == stateUp {
		return
	}
	b.state = stateRinging
	p.emit(chanEvent(ami.EventNewstate, b))
	p.updateDevice(b.endpoint)
	a.progressed = true
	p.updateDevice(a.endpoint)
	p.emit(dialEvent(ami.EventDialState, a, b, "DialStatus", "RINGING"))
	if a.srv != nil && a.state != stateUp {
		srv := a.srv
		c.srvDo(a, func(context.Context) { srv.Respond(180, "Ringing", nil) })
	}
}

// invite starts the outgoing INVITE of channel b to contact ct. Responses
// come back to the actor as evResponse and evFail. p.mu held.
func (c *call) invite(b *channel, ct contact, cidNum, cidName string, offer []byte) {
	p := c.p
	host, port := p.sipHostPort()
	req := sip.NewRequest(sip.INVITE, ct.uri)
	req.SetBody(offer)
	b.sdpSent = offer
	dua := p.udpDUA
	if ct.tcp {
		dua = p.tcpDUA
		req.SetTransport("TCP")
		req.SetDestination(ct.source)
	} else {
		req.SetTransport("UDP")
	}
	from := &sip.FromHeader{DisplayName: cidName, Address: sip.Uri{Scheme: "sip", User: cidNum, Host: host, Port: port}, Params: sip.NewParams()}
	from.Params.Add("tag", sip.GenerateTagN(16))
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: b.endpoint, Host: ct.uri.Host, Port: ct.uri.Port}, Params: sip.NewParams()}
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.AppendHeader(sip.HeaderClone(&dua.ContactHDR))
	for _, h := range b.sipHeaders {
		req.AppendHeader(h)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	b.cancelCli = cancel
	c.sipWG.Add(1)
	go func() {
		defer c.sipWG.Done()
		sess, err := dua.WriteInvite(ctx, req)
		if err != nil {
			c.post(callEvent{kind: evFail, ch: b})
			return
		}
		p.mu.Lock()
		b.cli = sess
		p.mu.Unlock()
		err = waitAnswer(ctx, sess, sipgo.AnswerOptions{OnResponse: func(r *sip.Response) error {
			if r.IsProvisional() && r.StatusCode > 100 {
				c.post(callEvent{kind: evResponse, ch: b, res: r})
			}
			if r.IsSuccess() {
				// Index the dialog before anyone sees the 2xx: the callee
				// may send BYE right after its ACK.
				if id, ok := uacDialogID(r); ok {
					p.mu.Lock()
					if !b.gone {
						b.dialogID = id
						p.dialogs[id] = b
					}
					p.mu.Unlock()
				}
			}
			return nil
		}})
		if err == nil {
			if ackErr := sess.Ack(context.Background()); ackErr != nil {
				p.log.Debug("pbxsim ack failed", "err", ackErr)
			}
			c.post(callEvent{kind: evResponse, ch: b, res: sess.InviteResponse})
			return
		}
		var dr *sipgo.ErrDialogResponse
		if errors.As(err, &dr) {
			c.post(callEvent{kind: evFail, ch: b, res: dr.Res})
			return
		}
		c.post(callEvent{kind: evFail, ch: b})
	}()
}

// waitAnswer is sess.WaitAnswer with its panic made an error. sipgo
// v1.7.3 (the newest served) dereferences a nil response when the
// callee is given up (ctx cancelled) and the CANCEL's transaction ends
// with neither a response nor an error (DialogClientSession.inviteCancel:
// Do returns nil, tx.Err() and tx.Err() may be nil), seen once in
// cmd/ctibridge's tests: without this it takes the whole PBX down. The
// transaction is terminated by WaitAnswer's own defer either way.
func waitAnswer(ctx context.Context, sess *sipgo.DialogClientSession, opts sipgo.AnswerOptions) error {
	return recovered(func() error { return sess.WaitAnswer(ctx, opts) })
}

// recovered runs f and returns its error, or a panic of f's as one.
func recovered(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pbxsim: sipgo panicked: %v", r)
		}
	}()
	return f()
}

// byeStale hangs up a callee that answered after it was given up.
func (c *call) byeStale(b *channel) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if cli := b.cli; cli != nil {
		c.goSIP(func(ctx context.Context) { cli.Bye(ctx) })
	}
}

// dialFailed: the callee refused (busy, not found...) or did not answer in
// time. The dialplan goes on to Hangup(), as in the recordings.
func (c *call) dialFailed(a, b *channel, target string, cause, tech int) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	techKV := []string{}
	if tech != 0 {
		techKV = []string{"TechCause", strconv.Itoa(tech)}
	}
	if cause == 19 && tech == 0 {
		b.cancelCli() // ring timeout: CANCEL
	} else {
		p.emit(chanEvent(ami.EventHangupRequest, b, append([]string{"Cause", strconv.Itoa(cause)}, techKV...)...))
	}
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", dialStatus(cause)))
	c.hangupChannel(b, cause, tech)
	a.priority = 4
	a.app, a.appData = "Hangup", ""
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16")) // no TechCause: busy_486
	disp := "NO ANSWER"
	switch cause {
	case 17:
		disp = "BUSY"
	case 1, 21, 34, 38, 127:
		disp = "FAILED"
	}
	if a.state == stateUp {
		c.sendBye(a, true)
	}
	c.hangupChannel(a, cause, tech)
	p.emitCdr(a, target, b, "Dial", a.dialData, disp)
	// The dialplan's Hangup() after the failed Dial is a Cdr of its own
	// (busy_486 recording).
	p.emitCdr(a, target, nil, "Hangup", "", disp)
}

// callerHangupRequest announces that caller a left while its call rang
// (why: a CANCEL, a BYE, an AMI Hangup...): the hangup cause and SIP
// code it ends with, and the HangupRequest's fields. p.mu is held.
func (p *PBX) callerHangupRequest(a *channel, why evKind) (cause, tech int, kv []string) {
	cause, tech = 16, 0
	if why == evCancel {
		cause, tech = 127, 487
	}
	kv = []string{"Cause", strconv.Itoa(cause)}
	if tech != 0 {
		kv = append(kv, "TechCause", strconv.Itoa(tech))
	}
	p.emit(chanEvent(ami.EventHangupRequest, a, kv...))
	return cause, tech, kv
}

// callerGone: the calling side left while the callee was still ringing.
func (c *call) callerGone(a, b *channel, target string, why evKind) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cause, tech, kv := p.callerHangupRequest(a, why)
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", "CANCEL"))
	kv[1] = "16"
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, kv...))
	b.cancelCli()
	bTech := 0
	if why == evCancel {
		bTech = 500 // as Asterisk reports the callee of a cancelled call (no_answer_caller_cancel)
	}
	c.hangupChannel(b, 127, bTech)
	p.emitCdr(a, target, b, "Dial", a.appData, "NO ANSWER")
	if why == evHangup || why == evNoAck {
		c.sendBye(a, true)
	}
	c.hangupChannel(a, cause, tech)
}

// bridgeCall: the callee answered. Both sides go into a basic bridge until
// one hangs up, is redirected or parked.
func (c *call) bridgeCall(a, b *channel, target string, res *sip.Response) (*channel, string) {
	p := c.p
	p.mu.Lock()
	p.stats.Answered++
	b.state = stateUp
	b.answered = p.cfg.Now()
	b.sdp = res.Body()
	p.emit(chanEvent(ami.EventNewstate, b))
	p.updateDevice(b.endpoint)
	b.exten = ""
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", "ANSWER"))
	a.progressed = true
	if a.state == stateUp {
		c.mediaTo(a, b.sdp) // answered before: an Originate's first leg, a transferee
	}
	c.answer(a, b.sdp)
	p.updateDevice(a.endpoint)
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, br, nil))
	c.enter(br, b)
	c.enter(br, a)
	p.mu.Unlock()
	return c.talk(a, b, target)
}

func (c *call) enter(br *bridge, ch *channel) {
	br.chans = append(br.chans, ch)
	ch.bridge = br
	c.p.emit(bridgeEvent(ami.EventBridgeEnter, br, ch))
}

// enterSwap is enter for a channel that takes the place of a Local
// half optimised away: Asterisk names the half in SwapUniqueid.
func (c *call) enterSwap(br *bridge, ch, half *channel) {
	br.chans = append(br.chans, ch)
	ch.bridge = br
	m := bridgeEvent(ami.EventBridgeEnter, br, ch)
	c.p.emit(ami.NewMessage(append(m.Headers(), ami.Header{Key: "SwapUniqueid", Value: half.uniqueid})...))
}

func (c *call) leave(ch *channel) {
	br := ch.bridge
	if br == nil {
		return
	}
	for i, x := range br.chans {
		if x == ch {
			br.chans = append(br.chans[:i], br.chans[i+1:]...)
			break
		}
	}
	ch.bridge = nil
	c.p.emit(bridgeEvent(ami.EventBridgeLeave, br, ch))
}

// talk runs while a (the dialling side) and b (the dialled side) are
// bridged.
func (c *call) talk(a, b *channel, target string) (*channel, string) {
	p := c.p
	max := time.NewTimer(p.cfg.MaxCallDuration)
	defer max.Stop()
	other := func(x *channel) *channel {
		if x == a {
			return b
		}
		return a
	}
	lastData := a.appData
	for {
		select {
		case e := <-c.events:
			if e.ch != a && e.ch != b {
				if e.kind == evResponse && e.res.IsSuccess() {
					c.byeStale(e.ch)
				}
				continue
			}
			switch e.kind {
			case evBye, evHangup, evNoAck, evCancel:
				cause := hangupCause(e.kind)
				if e.kind == evHangup && e.cause != 0 {
					cause = e.cause
				}
				c.hangupBridged(a, b, e.ch, cause, e.kind != evBye, target, lastData)
				return nil, ""
			case evRedirect:
				if e.before != nil {
					e.before()
				}
				x := e.ch
				y := other(x)
				p.mu.Lock()
				if e.other != nil {
					p.emitBlindTransfer(e.other, x, e.context, e.exten)
				}
				c.agentComplete(a, "transfer")
				c.q = nil
				x.context, x.exten, x.priority = e.context, e.exten, 1
				br := x.bridge
				c.leave(x)
				c.leave(y)
				p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
				c.sendBye(y, true)
				if x == a {
					// The caller goes on: this segment is a Cdr of its own,
					// reported when the caller hangs up.
					a.splitCdr(b, lastData, p.cfg.Now())
				} else {
					p.emitCdr(a, target, b, "Dial", lastData, "ANSWERED")
				}
				c.hangupChannel(y, 16, 0)
				p.mu.Unlock()
				return x, e.exten
			case evAtxfer:
				return c.atxfer(a, b, e.ch, e.exten, e.context, target, lastData)
			case evPark:
				p.mu.Lock()
				c.agentComplete(a, "transfer")
				c.q = nil
				p.mu.Unlock()
				return c.park(e.ch, other(e.ch))
			case evHold, evUnhold:
				y := other(e.ch)
				p.mu.Lock()
				if e.kind == evHold && !y.onHold {
					p.emit(chanEvent(ami.EventHold, e.ch, "MusicClass", "default"))
					y.onHold = true
					p.updateDevice(y.endpoint)
					p.emit(chanEvent(ami.EventMusicOnHoldStart, y, "Class", "default"))
				} else if e.kind == evUnhold && y.onHold {
					p.emit(chanEvent(ami.EventUnhold, e.ch))
					y.onHold = false
					p.updateDevice(y.endpoint)
					p.emit(chanEvent(ami.EventMusicOnHoldStop, y))
				}
				p.mu.Unlock()
			}
		case <-max.C:
			c.hangupBridged(a, b, a, 16, true, target, lastData)
			return nil, ""
		case <-c.ctx.Done():
			c.hangupBridged(a, b, a, 16, true, target, lastData)
			return nil, ""
		}
	}
}
