package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// handleRefer is a phone's transfer button: a blind transfer by REFER
// (RFC 3515) of the party bridged with the phone to the Refer-To user, as
// chan_pjsip does it: 202 Accepted, NOTIFY "100 Trying", NOTIFY "200 OK",
// then the transfer (BlindTransfer, the transferee leaves the bridge and
// dials the target, the transferer is hung up). A target the dialplan
// cannot reach ends the subscription with NOTIFY "503 Service
// Unavailable" and the call goes on. Attended transfer (Refer-To with
// Replaces) is refused with 501.
func (p *PBX) handleRefer(req *sip.Request, tx sip.ServerTransaction) {
	ch := p.lookupDialog(req, false)
	if ch == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	target, replaces, ok := referTarget(req)
	if !ok {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request", nil))
		return
	}
	if replaces {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusNotImplemented, "Not Implemented", nil))
		return
	}
	p.mu.Lock()
	var peer *channel
	if br := ch.bridge; br != nil && !ch.gone {
		for _, y := range br.chans {
			if y != ch {
				peer = y
			}
		}
	}
	reachable := p.routable(target)
	p.mu.Unlock()
	if peer == nil {
		tx.Respond(sip.NewResponseFromRequest(req, 603, "Declined", nil))
		return
	}
	p.respondInDialog(ch, req, tx, sip.NewResponseFromRequest(req, sip.StatusAccepted, "Accepted", nil))
	p.notifyRefer(ch, "SIP/2.0 100 Trying", false)
	if !reachable {
		p.notifyRefer(ch, "SIP/2.0 503 Service Unavailable", true)
		return
	}
	// The final NOTIFY goes from the call's own loop, just before the
	// transfer: a phone hangs up on reading it (baresip does), and its BYE
	// must reach the call after the transfer, not before it, or it would
	// end the call it was transferring.
	ch.call.post(callEvent{kind: evRedirect, ch: peer, other: ch, context: p.cfg.Context, exten: target,
		before: func() { p.notifyRefer(ch, "SIP/2.0 200 OK", true) }})
}

// referTarget reads the user of the Refer-To URI and whether it asks for
// an attended transfer (a Replaces header in the URI).
func referTarget(req *sip.Request) (user string, replaces, ok bool) {
	h := req.GetHeader("Refer-To")
	if h == nil {
		return "", false, false
	}
	v := strings.TrimSpace(h.Value())
	if i := strings.IndexByte(v, '<'); i >= 0 {
		j := strings.IndexByte(v[i:], '>')
		if j < 0 {
			return "", false, false
		}
		v = v[i+1 : i+j]
	}
	var uri sip.Uri
	if err := sip.ParseUri(v, &uri); err != nil || uri.User == "" {
		return "", false, false
	}
	return uri.User, strings.Contains(strings.ToLower(v), "replaces="), true
}

// routable reports whether the dialplan has somewhere to send target: an
// extension, an auto-answer number, the queue or a parking space. p.mu
// held.
func (p *PBX) routable(target string) bool {
	if space, err := strconv.Atoi(target); err == nil && space >= parkFirst && space <= parkLast {
		return true
	}
	return p.exts[target] != nil || p.auto[target] || target == p.cfg.QueueNumber
}

// notifyRefer sends the implicit subscription's NOTIFY with a sipfrag of
// the transfer's progress in ch's dialog and waits for its answer (a
// short while), so that it goes before anything else the transfer sends.
func (p *PBX) notifyRefer(ch *channel, frag string, final bool) {
	p.mu.Lock()
	if ch.gone {
		p.mu.Unlock()
		return
	}
	var uri sip.Uri
	switch {
	case ch.srv != nil && ch.srv.InviteRequest.Contact() != nil:
		uri = ch.srv.InviteRequest.Contact().Address
	case ch.cli != nil && ch.cli.InviteResponse != nil && ch.cli.InviteResponse.Contact() != nil:
		uri = ch.cli.InviteResponse.Contact().Address
	default:
		p.mu.Unlock()
		return
	}
	dua := p.udpDUA
	if ch.tcp {
		dua = p.tcpDUA
	}
	req := sip.NewRequest(sip.NOTIFY, uri)
	req.AppendHeader(sip.NewHeader("Event", "refer"))
	state := "active;expires=60"
	if final {
		state = "terminated;reason=noresource"
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	req.AppendHeader(sip.NewHeader("Content-Type", "message/sipfrag;version=2.0"))
	req.AppendHeader(sip.HeaderClone(&dua.ContactHDR))
	req.SetBody([]byte(frag + "\r\n"))
	if ch.tcp {
		req.SetTransport("TCP")
	}
	done := make(chan struct{})
	send := func(ctx context.Context) {
		defer close(done)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		if ch.srv != nil {
			_, err = ch.srv.Do(ctx, req)
		} else {
			_, err = ch.cli.Do(ctx, req)
		}
		if err != nil {
			p.log.Debug("pbxsim refer notify", "err", err)
		}
	}
	if ch.srv != nil {
		if ch.srvQ == nil {
			p.mu.Unlock()
			return
		}
		ch.call.srvDo(ch, send)
	} else {
		ch.call.goSIP(send)
	}
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
}
