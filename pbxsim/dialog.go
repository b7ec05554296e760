package pbxsim

import (
	"context"
	"strings"
	"time"

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
