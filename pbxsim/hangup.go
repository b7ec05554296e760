package pbxsim

import (
	"context"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// hangupBridged ends a bridged call that x left, in the order Asterisk
// reports it: the caller's hangup tears the bridge down before the callee
// hangs up; the callee's hangup is reported before the caller's bridge
// leave. A queue call (c.q) adds AgentComplete and app_queue's Cdrs (one
// per member that rang, queue_answered recording).
func (c *call) hangupBridged(a, b, x *channel, cause int, byeX bool, target, lastData string) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	qc := c.q
	y := a
	if x == a {
		y = b
	}
	br := a.bridge
	if br == nil {
		br = b.bridge
	}
	if qc != nil {
		p.emit(chanEvent(ami.EventHangupRequest, x)) // app_queue's hangup carries no Cause
	} else {
		p.hangupRequest(x, cause)
	}
	if byeX {
		c.sendBye(x, true)
	}
	c.sendBye(y, true)
	for _, ch := range []*channel{a, b} {
		if ch.onHold {
			ch.onHold = false
			p.emit(chanEvent(ami.EventMusicOnHoldStop, ch))
		}
	}
	if qc != nil {
		reason := "caller"
		if x == b {
			reason = "agent"
		}
		c.agentComplete(a, reason)
	}
	if x == a {
		c.leave(a)
		c.leave(b)
		if br != nil {
			p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
		}
		if a.dialplan {
			p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", strconv.Itoa(cause))) // its dialplan ends
		}
		if b.dialplan {
			// Hung up by the bridge's end, like a (park_retrieve).
			p.emit(chanEvent(ami.EventSoftHangupRequest, b, "Cause", strconv.Itoa(cause)))
		}
		c.hangupChannel(b, cause, 0)
	} else {
		c.leave(b)
		c.hangupChannel(b, cause, 0)
		c.leave(a)
		if br != nil {
			p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
		}
		if qc != nil {
			a.priority = 5 // NoOp(QUEUESTATUS), Hangup()
		}
		if a.dialplan {
			p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", strconv.Itoa(cause))) // its dialplan ends
		}
	}
	if qc == nil {
		now := p.cfg.Now()
		switch {
		case !a.dialplan:
			// Two called channels (after an attended transfer): the Cdr is
			// the target's, as Asterisk's cdr engine picks it.
			p.cdrAt(b, b.exten, a.name, "AppDial", "(Outgoing Line)", b.answered, now, "ANSWERED")
		case b.partyA:
			// A retrieved parked call owns the Cdr of its bridge; the
			// retriever's own ends when it was bridged (park_retrieve).
			p.cdrRecord(a, target, "", a.app, a.appData, a.created, a.answered, a.answered, "ANSWERED")
			p.cdrAt(b, b.dialled, a.name, "Dial", b.dialData, b.answered, now, "ANSWERED")
		default:
			p.emitCdr(a, target, b, "Dial", lastData, "ANSWERED")
		}
		c.hangupChannel(a, cause, 0)
		return
	}
	c.hangupChannel(a, cause, 0)
	now := p.cfg.Now()
	data := p.queueData()
	p.cdrAt(a, target, b.name, "Queue", data, a.answered, now, "ANSWERED")
	for _, l := range qc.cancelled {
		p.cdrAt(a, target, l.b.name, "Queue", data, a.answered, l.ended, "NO ANSWER")
	}
}

// causeNoUserResponse (18) is the cause of a channel whose answer was
// never acknowledged: PJSIP ends the session with 408 after 64*T1 and
// chan_pjsip's hangup_sip2cause maps 408 to AST_CAUSE_NO_USER_RESPONSE.
const causeNoUserResponse = 18

// hangupCause is the cause of a call ended by an event of kind k: normal
// clearing, or no user response for an answer never acknowledged (the
// bridge passes it on to the peer).
func hangupCause(k evKind) int {
	if k == evNoAck {
		return causeNoUserResponse
	}
	return 16
}

// hangupRequest emits HangupRequest for x. Asterisk carries the Cause
// only for a channel in a Dial, dialling or dialled; one in ConfBridge,
// VoiceMail, Pickup or ParkedCall has none (the recordings). p.mu held.
func (p *PBX) hangupRequest(x *channel, cause int) {
	if x.app == "Dial" || x.app == "AppDial" {
		p.emit(chanEvent(ami.EventHangupRequest, x, "Cause", strconv.Itoa(cause)))
		return
	}
	p.emit(chanEvent(ami.EventHangupRequest, x))
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
	if ch.noAck {
		cause, tech = causeNoUserResponse, 408
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
	ch.spyeeGone()
	p.emit(chanEvent(ami.EventHangup, ch, kv...))
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
	for _, part := range a.cdrParts {
		disp := part.disposition
		if disp == "" {
			disp = "ANSWERED"
		}
		app := part.app
		if app == "" {
			app = "Dial"
		}
		p.cdrRecord(a, dst, part.destCh, app, part.data, part.start, part.answer, part.end, disp)
	}
	a.cdrParts = nil
	start := a.created
	if !a.cdrStart.IsZero() {
		// After a transfer the channel was already up: the new segment is
		// answered from its start.
		start = a.cdrStart
		if !at.IsZero() {
			at = start
		}
	}
	p.cdrRecord(a, dst, destCh, app, data, start, at, now, disposition)
}

// splitCdr ends ch's Cdr segment with peer (its Dial's data) at end, at
// a transfer or a park: the next segment starts there; all are reported
// when ch hangs up (blind_transfer_redirect, park_retrieve). p.mu held.
func (ch *channel) splitCdr(peer *channel, data string, end time.Time) {
	at := peer.answered
	if at.IsZero() {
		at = ch.answered
	}
	ch.cdrParts = append(ch.cdrParts, cdrPart{destCh: peer.name, data: data, start: cdrStartOf(ch), answer: at, end: end})
	ch.cdrStart = end
}

// cdrRecord emits one Cdr of a's call. p.mu held.
func (p *PBX) cdrRecord(a *channel, dst, destCh, app, data string, start, at, now time.Time, disposition string) {
	const layout = "2006-01-02 15:04:05"
	answer, billsec := "", 0
	if !at.IsZero() {
		answer = at.Format(layout)
		billsec = int(now.Sub(at) / time.Second)
	}
	hs := append(amievent.Head(ami.EventCdr, "cdr,all", 22),
		ami.Header{Key: "AccountCode", Value: a.accountCode},
		ami.Header{Key: "Source", Value: a.cidNum},
		ami.Header{Key: "Destination", Value: dst},
		ami.Header{Key: "DestinationContext", Value: p.cfg.Context},
		ami.Header{Key: "CallerID", Value: `"` + a.cidName + `" <` + a.cidNum + `>`},
		ami.Header{Key: "Channel", Value: a.name},
		ami.Header{Key: "DestinationChannel", Value: destCh},
		ami.Header{Key: "LastApplication", Value: app},
		ami.Header{Key: "LastData", Value: data},
		ami.Header{Key: "StartTime", Value: start.Format(layout)},
		ami.Header{Key: "AnswerTime", Value: answer},
		ami.Header{Key: "EndTime", Value: now.Format(layout)},
		ami.Header{Key: "Duration", Value: strconv.Itoa(int(now.Sub(start) / time.Second))},
		ami.Header{Key: "BillableSeconds", Value: strconv.Itoa(billsec)},
		ami.Header{Key: "Disposition", Value: disposition},
		ami.Header{Key: "AMAFlags", Value: "DOCUMENTATION"},
		ami.Header{Key: "UniqueID", Value: a.uniqueid},
		ami.Header{Key: "UserField", Value: ""})
	if p.freepbx() {
		// cdr_manager's mapping recordingfile => RecordingFile (the third
		// set's PBX): every Cdr has it, empty unless the call is recorded.
		hs = append(hs, ami.Header{Key: "RecordingFile", Value: a.recFile})
	}
	p.emit(ami.NewMessage(hs...))
}

// emitBlindTransfer reports the BlindTransfer action. p.mu held.
func (p *PBX) emitBlindTransfer(transferer, transferee *channel, context, exten string) {
	hs := amievent.Head(ami.EventBlindTransfer, "call,all", 44)
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
