package pbxsim

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/emiago/sipgo"
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
}

type evKind int

const (
	evResponse evKind = iota // a provisional or 2xx response to our INVITE to ch
	evFail                   // our INVITE to ch got a final failure (res may be nil)
	evCancel                 // ch's caller sent CANCEL
	evBye                    // ch sent BYE (already answered 200)
	evHangup                 // AMI Hangup of ch
	evRedirect               // AMI Redirect (or BlindTransfer) of ch
	evPark                   // AMI Park of ch
	evHold                   // ch put its peer on hold (re-INVITE)
	evUnhold                 // ch took it off hold
	evNoAck                  // our 2xx to ch was never acknowledged
	evUnpark                 // another call retrieves parked ch
)

type callEvent struct {
	kind    evKind
	ch      *channel
	res     *sip.Response
	cause   int
	context string
	exten   string
	other   *channel  // BlindTransfer: the transferer; Park: the parker
	to      *call     // evUnpark: the retrieving call
	reply   chan bool // evUnpark: whether ch was handed over
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
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		f(ctx)
	}()
}

// startSrvQueue starts the goroutine that performs, in order, what is
// sent on ch's server dialog: sipgo's DialogServerSession is not safe for
// concurrent responses, a 180 must precede the 200, and a BYE must wait for
// the ACK of our 200 (RFC 3261 §15). It ends at ch's Hangup.
func (c *call) startSrvQueue(ch *channel) {
	q := make(chan func(context.Context), 16)
	ch.srvQ = q
	c.sipWG.Add(1)
	go func() {
		defer c.sipWG.Done()
		for f := range q {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			f(ctx)
			cancel()
		}
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

// handleInvite answers a dialog-creating INVITE. sipgo calls it in its own
// goroutine; it returns only when the call has ended, since the INVITE
// server transaction must outlive the dialog.
func (p *PBX) handleInvite(req *sip.Request, tx sip.ServerTransaction) {
	if to := req.To(); to != nil && to.Params.Has("tag") {
		p.handleReinvite(req, tx)
		return
	}
	from := req.From()
	if from == nil || req.Contact() == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request", nil))
		return
	}
	runCtx := p.ctxRun()
	if runCtx.Err() != nil {
		tx.Respond(sip.NewResponseFromRequest(req, 503, "Service Unavailable", nil))
		return
	}
	caller := from.Address.User
	target := req.Recipient.User
	p.mu.Lock()
	_, isExt := p.exts[caller]
	p.mu.Unlock()
	if isExt && p.cfg.SIPSecret != "" && !p.authorized(req, caller) {
		p.challenge(req, tx)
		return
	}
	tcp := strings.EqualFold(req.Transport(), "tcp")
	dua := p.udpDUA
	if tcp {
		dua = p.tcpDUA
	}
	dtx, err := dua.ReadInvite(req, tx)
	if err != nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request", nil))
		return
	}
	dtx.Respond(100, "Trying", nil)

	c := p.newCall()
	stop := context.AfterFunc(runCtx, c.cancel)
	defer stop()
	p.mu.Lock()
	p.stats.Calls++
	var a *channel
	if isExt {
		a = p.newChannel(c, caller)
	} else {
		a = p.newChannel(c, p.cfg.Trunk)
		a.context = "from-trunk"
		a.cidNum, a.cidName = caller, from.DisplayName
	}
	a.linkedid = a.uniqueid
	a.state = stateRing
	a.exten = target
	a.srv, a.tcp, a.sdp = dtx, tcp, req.Body()
	c.startSrvQueue(a)
	a.dialogID = dtx.ID
	p.dialogs[a.dialogID] = a
	p.emit(chanEvent("Newchannel", a))
	p.mu.Unlock()

	if !tx.OnCancel(func(*sip.Request) { c.post(callEvent{kind: evCancel, ch: a}) }) {
		c.post(callEvent{kind: evCancel, ch: a})
	}
	c.run(a, target)
	c.finish()
}

// handleReinvite answers an in-dialog INVITE: hold and unhold. Like
// Asterisk, pbxsim does not pass it on: the held party gets music on hold.
func (p *PBX) handleReinvite(req *sip.Request, tx sip.ServerTransaction) {
	ch := p.lookupDialog(req, false)
	if ch == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	hold := sdpHold(req.Body())
	res := sip.NewSDPResponseFromRequest(req, p.sdp(uint64(len(ch.name)), hold))
	p.mu.Lock()
	dua := p.udpDUA
	if ch.tcp {
		dua = p.tcpDUA
	}
	p.mu.Unlock()
	res.AppendHeader(sip.HeaderClone(&dua.ContactHDR))
	tx.Respond(res)
	kind := evUnhold
	if hold {
		kind = evHold
	}
	ch.call.post(callEvent{kind: kind, ch: ch})
}

// lookupDialog finds the channel of an in-dialog request. A BYE may race
// the response that created the dialog, so it waits a little for it.
func (p *PBX) lookupDialog(req *sip.Request, wait bool) *channel {
	id, err := sip.DialogIDFromRequestUAS(req)
	if err != nil {
		return nil
	}
	for i := 0; ; i++ {
		p.mu.Lock()
		ch := p.dialogs[id]
		p.mu.Unlock()
		if ch != nil || !wait || i >= 25 {
			return ch
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *PBX) handleAck(req *sip.Request, tx sip.ServerTransaction) {
	if ch := p.lookupDialog(req, false); ch != nil && ch.srv != nil {
		ch.srv.ReadAck(req, tx)
	}
}

func (p *PBX) handleBye(req *sip.Request, tx sip.ServerTransaction) {
	ch := p.lookupDialog(req, true)
	if ch == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	var err error
	if ch.srv != nil {
		err = ch.srv.ReadBye(req, tx)
	} else if ch.cli != nil {
		err = ch.cli.ReadBye(req, tx)
	}
	if err != nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	p.mu.Lock()
	ch.byeRecv = true
	c := ch.call
	p.mu.Unlock()
	c.post(callEvent{kind: evBye, ch: ch})
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
	switch {
	case target == p.cfg.QueueNumber:
		return c.queueCall(a, target)
	case registered && !p.auto[target]:
		return c.dial(a, target)
	case e != nil || p.auto[target]:
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
				p.emit(chanEvent("HangupRequest", a, "Cause", "16"))
				c.sendBye(a, e.kind != evBye)
				p.emit(chanEvent("SoftHangupRequest", a, "Cause", "16"))
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
		p.emit(chanEvent("Newstate", a))
		p.updateDevice(a.endpoint)
	}
	if a.srv != nil && !a.srvAnswered {
		a.srvAnswered = true
		srv := a.srv
		c.srvDo(a, func(context.Context) {
			err := srv.RespondSDP(body)
			if err != nil && srv.LoadState() != sip.DialogStateEnded {
				c.post(callEvent{kind: evNoAck, ch: a})
			}
		})
	}
}

// dial is Dial(PJSIP/<target>,<ring timeout>,tT) from channel a.
func (c *call) dial(a *channel, target string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	ct := *p.exts[target].contact
	b := p.newChannel(c, target)
	b.linkedid = a.linkedid
	b.exten = "s"
	b.accountCode = a.accountCode
	b.app, b.appData = "AppDial", "(Outgoing Line)"
	b.tcp = ct.tcp
	p.emit(chanEvent("Newchannel", b))
	if a.context == "from-trunk" {
		a.context = p.cfg.Context // Goto(from-internal,${EXTEN},1)
	}
	a.priority = 2
	a.app, a.appData = "Dial", "PJSIP/"+target+","+strconv.Itoa(int(p.cfg.RingTimeout/time.Second))+",tT"
	b.exten = target
	b.conNum, b.conName = a.cidNum, a.cidName
	p.emit(chanEvent("NewConnectedLine", b))
	p.emit(dialEvent("DialBegin", a, b, "DialString", target))
	a.conNum, a.conName = b.cidNum, b.cidName
	p.emit(chanEvent("NewConnectedLine", a))
	offer := a.sdp
	if a.state == stateUp || len(offer) == 0 {
		offer = p.sdp(p.chanSeq, false)
	}
	c.invite(b, ct, a.cidNum, a.cidName, offer)
	p.mu.Unlock()

	ring := time.NewTimer(p.cfg.RingTimeout)
	defer ring.Stop()
	for {
		select {
		case e := <-c.events:
			switch {
			case e.kind == evResponse && e.ch == b && e.res.IsProvisional():
				p.mu.Lock()
				if b.state != stateRinging && b.state != stateUp {
					b.state = stateRinging
					p.emit(chanEvent("Newstate", b))
					p.updateDevice(b.endpoint)
					a.progressed = true
					p.updateDevice(a.endpoint)
					p.emit(dialEvent("DialState", a, b, "DialStatus", "RINGING"))
					if a.srv != nil && a.state != stateUp {
						srv := a.srv
						c.srvDo(a, func(context.Context) { srv.Respond(180, "Ringing", nil) })
					}
				}
				p.mu.Unlock()
			case e.kind == evResponse && e.ch == b:
				return c.bridgeCall(a, b, target, e.res)
			case e.kind == evResponse && e.res.IsSuccess():
				c.byeStale(e.ch)
			case e.kind == evFail && e.ch == b:
				cause := 127
				tech := 0
				if e.res != nil {
					tech = e.res.StatusCode
					cause = sipToCause(tech)
				}
				c.dialFailed(a, b, target, cause, tech)
				return nil, ""
			case (e.kind == evHangup || e.kind == evNoAck) && e.ch == b:
				p.mu.Lock()
				b.cancelCli()
				p.mu.Unlock()
			case (e.kind == evCancel || e.kind == evBye || e.kind == evHangup || e.kind == evNoAck) && e.ch == a:
				c.callerGone(a, b, target, e.kind)
				return nil, ""
			}
		case <-ring.C:
			c.dialFailed(a, b, target, 19, 0)
			return nil, ""
		case <-c.ctx.Done():
			c.callerGone(a, b, target, evHangup)
			return nil, ""
		}
	}
}

// invite starts the outgoing INVITE of channel b to contact ct. Responses
// come back to the actor as evResponse and evFail. p.mu held.
func (c *call) invite(b *channel, ct contact, cidNum, cidName string, offer []byte) {
	p := c.p
	host, port := p.sipHostPort()
	req := sip.NewRequest(sip.INVITE, ct.uri)
	req.SetBody(offer)
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
		err = sess.WaitAnswer(ctx, sipgo.AnswerOptions{OnResponse: func(r *sip.Response) error {
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
		p.emit(chanEvent("HangupRequest", b, append([]string{"Cause", strconv.Itoa(cause)}, techKV...)...))
	}
	p.emit(dialEvent("DialEnd", a, b, "DialStatus", dialStatus(cause)))
	c.hangupChannel(b, cause, tech)
	a.priority = 4
	a.app, a.appData = "Hangup", ""
	p.emit(chanEvent("SoftHangupRequest", a, append([]string{"Cause", "16"}, techKV...)...))
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
	p.emitCdr(a, target, b, "Dial", "PJSIP/"+target+","+strconv.Itoa(int(p.cfg.RingTimeout/time.Second))+",tT", disp)
}

// callerGone: the calling side left while the callee was still ringing.
func (c *call) callerGone(a, b *channel, target string, why evKind) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cause, tech := 16, 0
	if why == evCancel {
		cause, tech = 127, 487
	}
	kv := []string{"Cause", strconv.Itoa(cause)}
	if tech != 0 {
		kv = append(kv, "TechCause", strconv.Itoa(tech))
	}
	p.emit(chanEvent("HangupRequest", a, kv...))
	p.emit(dialEvent("DialEnd", a, b, "DialStatus", "CANCEL"))
	p.emit(chanEvent("SoftHangupRequest", a, "Cause", "16"))
	b.cancelCli()
	c.hangupChannel(b, 127, 0)
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
	p.emit(chanEvent("Newstate", b))
	p.updateDevice(b.endpoint)
	b.exten = ""
	p.emit(dialEvent("DialEnd", a, b, "DialStatus", "ANSWER"))
	a.progressed = true
	c.answer(a, b.sdp)
	p.updateDevice(a.endpoint)
	br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent("BridgeCreate", br, nil))
	c.enter(br, b)
	c.enter(br, a)
	p.mu.Unlock()
	return c.talk(a, b, target)
}

func (c *call) enter(br *bridge, ch *channel) {
	br.chans = append(br.chans, ch)
	ch.bridge = br
	c.p.emit(bridgeEvent("BridgeEnter", br, ch))
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
	c.p.emit(bridgeEvent("BridgeLeave", br, ch))
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
				cause := 16
				if e.kind == evHangup && e.cause != 0 {
					cause = e.cause
				}
				c.hangupBridged(a, b, e.ch, cause, e.kind != evBye, target, lastData)
				return nil, ""
			case evRedirect:
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
				p.emit(bridgeEvent("BridgeDestroy", br, nil))
				c.sendBye(y, true)
				c.hangupChannel(y, 16, 0)
				p.mu.Unlock()
				return x, e.exten
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
					p.emit(chanEvent("Hold", e.ch, "MusicClass", "default"))
					y.onHold = true
					p.updateDevice(y.endpoint)
					p.emit(chanEvent("MusicOnHoldStart", y, "Class", "default"))
				} else if e.kind == evUnhold && y.onHold {
					p.emit(chanEvent("Unhold", e.ch))
					y.onHold = false
					p.updateDevice(y.endpoint)
					p.emit(chanEvent("MusicOnHoldStop", y))
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

// hangupBridged ends a bridged call that x left, in the order Asterisk
// reports it: the caller's hangup tears the bridge down before the callee
// hangs up; the callee's hangup is reported before the caller's bridge
// leave.
func (c *call) hangupBridged(a, b, x *channel, cause int, byeX bool, target, lastData string) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.q != nil {
		c.queueHangupBridged(a, b, x, cause, byeX, target)
		return
	}
	y := a
	if x == a {
		y = b
	}
	br := a.bridge
	if br == nil {
		br = b.bridge
	}
	p.emit(chanEvent("HangupRequest", x, "Cause", strconv.Itoa(cause)))
	if byeX {
		c.sendBye(x, true)
	}
	c.sendBye(y, true)
	stopMOH := func() {
		for _, ch := range []*channel{a, b} {
			if ch.onHold {
				ch.onHold = false
				p.emit(chanEvent("MusicOnHoldStop", ch))
			}
		}
	}
	stopMOH()
	if x == a {
		c.leave(a)
		c.leave(b)
		if br != nil {
			p.emit(bridgeEvent("BridgeDestroy", br, nil))
		}
		p.emit(chanEvent("SoftHangupRequest", a, "Cause", strconv.Itoa(cause)))
		c.hangupChannel(b, cause, 0)
		p.emitCdr(a, target, b, "Dial", lastData, "ANSWERED")
		c.hangupChannel(a, cause, 0)
		return
	}
	c.leave(b)
	c.hangupChannel(b, cause, 0)
	c.leave(a)
	if br != nil {
		p.emit(bridgeEvent("BridgeDestroy", br, nil))
	}
	p.emit(chanEvent("SoftHangupRequest", a, "Cause", strconv.Itoa(cause)))
	p.emitCdr(a, target, b, "Dial", lastData, "ANSWERED")
	c.hangupChannel(a, cause, 0)
}

// sendBye ends ch's SIP dialog from our side: BYE when answered, CANCEL
// (for our INVITE) or a final error (for theirs) otherwise. It does
// nothing when ch's side already sent BYE, unless force. p.mu held.
func (c *call) sendBye(ch *channel, force bool) {
	if ch.byeRecv || ch.byeSent {
		return
	}
	_ = force
	ch.byeSent = true
	switch {
	case ch.srv != nil && ch.srvAnswered:
		srv := ch.srv
		c.srvDo(ch, func(ctx context.Context) {
			// The 200 may still be waiting for its ACK: a BYE then is fine
			// (RFC 3261 §15), sipgo's session refuses only ended dialogs.
			if err := srv.Bye(ctx); err != nil {
				c.p.log.Debug("pbxsim bye failed", "channel", ch.name, "err", err)
			}
		})
	case ch.srv != nil:
		srv := ch.srv
		code, reason := causeToSIP(16)
		c.srvDo(ch, func(context.Context) { srv.Respond(code, reason, nil) })
	case ch.cli != nil && ch.state == stateUp:
		cli := ch.cli
		c.goSIP(func(ctx context.Context) {
			if err := cli.Bye(ctx); err != nil {
				c.p.log.Debug("pbxsim bye failed", "channel", ch.name, "err", err)
			}
		})
	case ch.cancelCli != nil:
		ch.cancelCli()
	}
}

// hangupChannel emits Hangup, answers an unanswered SIP caller with the
// matching error, forgets the channel and updates its device. p.mu held.
func (c *call) hangupChannel(ch *channel, cause, tech int) {
	p := c.p
	if ch.gone {
		return
	}
	if ch.srv != nil && !ch.srvAnswered && !ch.byeSent {
		ch.byeSent = true
		srv := ch.srv
		code, reason := causeToSIP(cause)
		if cause == 127 && tech == 487 {
			code = 0 // cancelled: sipgo already answered 487
		}
		if code != 0 {
			c.srvDo(ch, func(context.Context) { srv.Respond(code, reason, nil) })
		}
	}
	if ch.srvQ != nil {
		close(ch.srvQ) // nothing more will be sent on its dialog
		ch.srvQ = nil
	}
	kv := []string{"Cause", strconv.Itoa(cause), "Cause-txt", causeText(cause)}
	if tech != 0 {
		kv = append(kv, "TechCause", strconv.Itoa(tech))
	}
	ch.gone = true
	p.emit(chanEvent("Hangup", ch, kv...))
	p.dropChannel(ch)
	ch.onHold = false
	p.updateDevice(ch.endpoint)
	if ch.state != stateUp {
		p.stats.Failed++
	}
}

// emitCdr emits the cdr_manager record of a's call to dst. p.mu held.
func (p *PBX) emitCdr(a *channel, dst string, b *channel, app, data, disposition string) {
	var at time.Time
	if disposition == "ANSWERED" {
		at = a.answered
		if b != nil && !b.answered.IsZero() {
			at = b.answered
		}
	}
	destCh := ""
	if b != nil {
		destCh = b.name
	}
	p.cdrAt(a, dst, destCh, app, data, at, p.cfg.Now(), disposition)
}

// cdrAt emits a Cdr of a's call ending at now, answered at at (zero: not
// answered). p.mu held.
func (p *PBX) cdrAt(a *channel, dst, destCh, app, data string, at, now time.Time, disposition string) {
	const layout = "2006-01-02 15:04:05"
	answer, billsec := "", 0
	if !at.IsZero() {
		answer = at.Format(layout)
		billsec = int(now.Sub(at) / time.Second)
	}
	p.emit(ami.NewMessage(append(ev("Cdr", "cdr,all", 21),
		ami.Header{Key: "AccountCode", Value: a.accountCode},
		ami.Header{Key: "Source", Value: a.cidNum},
		ami.Header{Key: "Destination", Value: dst},
		ami.Header{Key: "DestinationContext", Value: p.cfg.Context},
		ami.Header{Key: "CallerID", Value: `"` + a.cidName + `" <` + a.cidNum + `>`},
		ami.Header{Key: "Channel", Value: a.name},
		ami.Header{Key: "DestinationChannel", Value: destCh},
		ami.Header{Key: "LastApplication", Value: app},
		ami.Header{Key: "LastData", Value: data},
		ami.Header{Key: "StartTime", Value: a.created.Format(layout)},
		ami.Header{Key: "AnswerTime", Value: answer},
		ami.Header{Key: "EndTime", Value: now.Format(layout)},
		ami.Header{Key: "Duration", Value: strconv.Itoa(int(now.Sub(a.created) / time.Second))},
		ami.Header{Key: "BillableSeconds", Value: strconv.Itoa(billsec)},
		ami.Header{Key: "Disposition", Value: disposition},
		ami.Header{Key: "AMAFlags", Value: "DOCUMENTATION"},
		ami.Header{Key: "UniqueID", Value: a.uniqueid},
		ami.Header{Key: "UserField", Value: ""})...))
}

// emitBlindTransfer reports the BlindTransfer action. p.mu held.
func (p *PBX) emitBlindTransfer(transferer, transferee *channel, context, exten string) {
	hs := ev("BlindTransfer", "call,all", 44)
	hs = append(hs, ami.Header{Key: "Result", Value: "Success"})
	hs = chanHeaders(hs, "Transferer", transferer)
	hs = chanHeaders(hs, "Transferee", transferee)
	if br := transferer.bridge; br != nil {
		hs = bridgeHeaders(hs, "", br)
	}
	hs = append(hs, ami.Header{Key: "IsExternal", Value: "No"},
		ami.Header{Key: "Context", Value: context}, ami.Header{Key: "Extension", Value: exten})
	p.emit(ami.NewMessage(hs...))
}

// uacDialogID is the ID under which requests from the far end of a dialog
// we started are found: sip.DialogIDFromRequestUAS of their requests puts
// our tag (their To) before theirs, while sip.DialogIDFromResponse puts
// the To tag first.
func uacDialogID(r *sip.Response) (string, bool) {
	cid, from, to := r.CallID(), r.From(), r.To()
	if cid == nil || from == nil || to == nil {
		return "", false
	}
	ours, _ := from.Params.Get("tag")
	theirs, _ := to.Params.Get("tag")
	if ours == "" || theirs == "" {
		return "", false
	}
	return sip.DialogIDMake(cid.Value(), ours, theirs), true
}
