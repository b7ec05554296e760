package pbxsim

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

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
	runCtx, ok := p.track()
	if !ok {
		tx.Respond(sip.NewResponseFromRequest(req, 503, "Service Unavailable", nil))
		return
	}
	defer p.calls.Done()
	caller := from.Address.User
	target := req.Recipient.User
	p.mu.Lock()
	_, isExt := p.exts[caller]
	p.mu.Unlock()
	if isExt && p.cfg.SIPSecret != "" && !p.authorized(req, caller) {
		p.challenge(req, tx)
		return
	}
	if body := req.Body(); len(body) > 0 && !sdpValid(body) {
		// An offer pbxsim cannot read, as chan_pjsip refuses it.
		tx.Respond(sip.NewResponseFromRequest(req, 488, "Not Acceptable Here", nil))
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
		a.context = p.trunkContext()
		a.did = target
		a.cidNum, a.cidName = caller, from.DisplayName
	}
	a.linkedid = a.uniqueid
	a.dialplan = true
	a.state = stateRing
	a.exten = target
	a.srv, a.tcp, a.sdp = dtx, tcp, req.Body()
	c.startSrvQueue(a)
	a.dialogID = dtx.ID
	p.dialogs[a.dialogID] = a
	p.emit(chanEvent(ami.EventNewchannel, a))
	p.mu.Unlock()

	if !tx.OnCancel(func(*sip.Request) { c.post(callEvent{kind: evCancel, ch: a}) }) {
		c.post(callEvent{kind: evCancel, ch: a})
	}
	if !isExt {
		target = p.didTarget(target)
	}
	c.run(a, target)
	c.finish()
}

// handleReinvite answers an in-dialog INVITE (or UPDATE) offer: hold and
// unhold. Like Asterisk with music on hold, pbxsim does not pass the hold
// on to the peer. Media stays where it flows, between the phones: the
// answer is the peer's own description (pbxsim's when pbxsim is the far
// end) in the direction that answers the offer, with the origin (o=) of
// what this side was sent before, its version incremented when the
// description changes (RFC 3264 §8).
func (p *PBX) handleReinvite(req *sip.Request, tx sip.ServerTransaction) {
	ch := p.lookupDialog(req, false)
	if ch == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	offer := req.Body()
	p.mu.Lock()
	if len(offer) == 0 {
		// An offerless re-INVITE (or UPDATE): offer what it has now.
		body := ch.sdpSent
		if len(body) == 0 {
			body = p.sdp(uint64(len(ch.name)), false)
		}
		p.mu.Unlock()
		res := sip.NewSDPResponseFromRequest(req, body)
		p.respondInDialog(ch, req, tx, res)
		return
	}
	if !sdpValid(offer) {
		p.mu.Unlock()
		tx.Respond(sip.NewResponseFromRequest(req, 488, "Not Acceptable Here", nil))
		return
	}
	base := p.sdp(uint64(len(ch.name)), false)
	if br := ch.bridge; br != nil {
		for _, y := range br.chans {
			if y != ch && len(y.sdp) > 0 {
				base = y.sdp
			}
		}
	}
	answer := sdpAnswer(offer, base, ch.sdpSent)
	ch.sdpSent = answer
	ch.sdp = offer
	p.mu.Unlock()
	p.respondInDialog(ch, req, tx, sip.NewSDPResponseFromRequest(req, answer))
	kind := evUnhold
	if sdpHold(offer) {
		kind = evHold
	}
	ch.call.post(callEvent{kind: kind, ch: ch})
}

// respondInDialog sends res, with our Contact, to an in-dialog request.
func (p *PBX) respondInDialog(ch *channel, req *sip.Request, tx sip.ServerTransaction, res *sip.Response) {
	p.mu.Lock()
	dua := p.udpDUA
	if ch.tcp {
		dua = p.tcpDUA
	}
	p.mu.Unlock()
	res.AppendHeader(sip.HeaderClone(&dua.ContactHDR))
	tx.Respond(res)
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

// unhandledResponse sees the responses no client transaction waits for
// (ackStray2xx).
func (p *PBX) unhandledResponse(res *sip.Response) {
	cli := p.udpCli
	if strings.EqualFold(res.Transport(), "tcp") {
		cli = p.tcpCli
	}
	known := func(id string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.dialogs[id] != nil
	}
	ackStray2xx(cli, res, known, func(bye func()) {
		if _, ok := p.track(); ok {
			go func() {
				defer p.calls.Done()
				bye()
			}()
		}
	}, p.log)
}

// ackStray2xx handles a response that reached no client transaction. A 2xx
// to our INVITE among them is a retransmission whose ACK was lost, or the
// answer of a callee we had given up (its 200 crossed our CANCEL, or came
// after we stopped waiting): each is acknowledged (RFC 3261 §13.2.2.4), so
// that the answerer stops retransmitting, and a dialog known does not
// have is ended with BYE, which goBye runs (in a goroutine of its
// accounting, or not at all when shutting down).
func ackStray2xx(cli *sipgo.Client, res *sip.Response, known func(dialogID string) bool, goBye func(bye func()), log *slog.Logger) {
	cseq := res.CSeq()
	if cseq == nil || cseq.MethodName != sip.INVITE || !res.IsSuccess() || res.Contact() == nil || res.CallID() == nil {
		return
	}
	id, _ := uacDialogID(res)
	if err := cli.WriteRequest(inDialogRequest(sip.ACK, res, cseq.SeqNo)); err != nil {
		log.Debug("ack of a stray 2xx failed", "err", err)
	}
	if known(id) {
		return
	}
	bye := inDialogRequest(sip.BYE, res, cseq.SeqNo+1)
	goBye(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 64*sip.T1)
		defer cancel()
		cli.Do(ctx, bye)
	})
}

// inDialogRequest builds a request of the dialog a 2xx to our INVITE
// created, sent to the answerer's Contact.
func inDialogRequest(method sip.RequestMethod, res *sip.Response, seq uint32) *sip.Request {
	req := sip.NewRequest(method, res.Contact().Address)
	req.AppendHeader(sip.HeaderClone(res.From()))
	req.AppendHeader(sip.HeaderClone(res.To()))
	req.AppendHeader(sip.HeaderClone(res.CallID()))
	req.AppendHeader(&sip.CSeqHeader{SeqNo: seq, MethodName: method})
	req.SetTransport(res.Transport())
	req.SetDestination(res.Source())
	return req
}
