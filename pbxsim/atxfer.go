package pbxsim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// Attended transfer by the AMI Atxfer action, as Asterisk 22 runs it
// (attended_transfer_atxfer, atxfer_complete): the transferer t keys the
// feature code *2 and the number (DTMFEnd), its peer y is put on hold
// (Hold, MusicOnHoldStart); t moves into a consult bridge with
// Local/<exten>@<context>-n;1 whose ;2 half dials the target. When t hangs
// up while talking with the target, the transfer completes: BridgeMerge,
// AttendedTransfer, the Local pair optimises away and the target talks
// with y. If the target does not answer (or hangs up), t is back with y.

// consult is an attended transfer in progress.
type consult struct {
	t, y     *channel  // transferer, transferee
	l1, l2   *channel  // the Local pair: ;1 in t's consult bridge, ;2 dials the target
	d        *channel  // the target's channel
	br1      *bridge   // the original bridge (y on hold)
	br2, br3 *bridge   // consult bridge (t, l1) and the target's (l2, d)
	up       bool      // the target answered
	blond    bool      // the transferer hung up while the target rang (blond.go)
	merged   time.Time // when the consult bridge merged into the held one
	exten    string
	started  time.Time // when the consultation began (the transferer left the call)
}

func (p *PBX) actAtxfer(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name, exten := req.Get("Channel"), req.Get("Exten")
	if name == "" {
		return errResp("No channel specified")
	}
	if exten == "" {
		return errResp("No extension specified")
	}
	ctx := req.Get("Context")
	if ctx == "" {
		ctx = p.cfg.Context
	}
	p.mu.Lock()
	t := p.channelByName(name)
	if t == nil {
		p.mu.Unlock()
		return errResp("Channel specified does not exist")
	}
	if t.bridge == nil || len(t.bridge.chans) != 2 || strings.HasPrefix(t.name, "Local/") {
		p.mu.Unlock()
		return errResp("Atxfer failed")
	}
	c := t.call
	p.mu.Unlock()
	c.post(callEvent{kind: evAtxfer, ch: t, exten: exten, context: ctx})
	return []ami.Message{resp("Success", "Message", "Atxfer successfully queued")}
}

// newLocalPair creates Local/<exten>@<ctx>-n;1 and ;2. p.mu held.
func (p *PBX) newLocalPair(c *call, exten, ctx string) (*channel, *channel) {
	n := p.localSeq
	p.localSeq++
	mk := func(half int) *channel {
		s := p.chanSeq
		p.chanSeq++
		now := p.cfg.Now()
		ch := &channel{call: c, name: fmt.Sprintf("Local/%s@%s-%08x;%d", exten, ctx, n, half),
			uniqueid: fmt.Sprintf("%d.%d", now.Unix(), s), context: ctx, exten: exten, priority: 1, created: now}
		p.channels[ch.name] = ch
		return ch
	}
	return mk(1), mk(2)
}

// localEvent is LocalBridge, LocalOptimizationBegin or ...End. p.mu held.
func localEvent(name string, l1, l2 *channel, kv ...string) ami.Message {
	hs := amievent.Head(name, "call,all", 40)
	hs = chanHeaders(hs, "LocalOne", l1)
	hs = chanHeaders(hs, "LocalTwo", l2)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

// atxfer runs an attended transfer by t of the call between a and b. It
// returns as talk does.
func (c *call) atxfer(a, b, t *channel, exten, ctx, target, lastData string) (*channel, string) {
	p := c.p
	y := a
	if t == a {
		y = b
	}
	p.mu.Lock()
	c.agentComplete(a, "transfer") // a queue call ends for the queue, as on Redirect
	c.q = nil
	x := &consult{t: t, y: y, br1: t.bridge, exten: exten, started: p.cfg.Now()}
	dtmf := func(d string) {
		hs := chanHeaders(amievent.Head(ami.EventDTMFEnd, "dtmf,all", 20), "", t) // its own class (the recordings)
		hs = append(hs, ami.Header{Key: "Digit", Value: d}, ami.Header{Key: "DurationMs", Value: "0"}, ami.Header{Key: "Direction", Value: "Received"})
		p.emit(ami.NewMessage(hs...))
	}
	dtmf("*")
	dtmf("2")
	p.emit(chanEvent(ami.EventHold, t)) // a feature's hold names no music class
	y.onHold = true
	p.updateDevice(y.endpoint)
	p.emit(chanEvent(ami.EventMusicOnHoldStart, y, "Class", "default"))
	for _, d := range exten {
		dtmf(string(d))
	}
	e := p.exts[exten]
	if e == nil || e.contact == nil {
		p.mu.Unlock()
		return c.consultFailed(a, b, x, target, lastData)
	}
	ct := *e.contact
	x.l1, x.l2 = p.newLocalPair(c, exten, ctx)
	x.l1.linkedid, x.l2.linkedid = t.linkedid, t.linkedid
	x.l2.state = stateRing
	x.l2.cidNum, x.l2.cidName = t.cidNum, t.cidName
	p.emit(chanEvent(ami.EventNewchannel, x.l1))
	p.emit(chanEvent(ami.EventNewchannel, x.l2))
	x.br2 = &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, x.br2, nil))
	p.emit(chanEvent(ami.EventNewCallerid, x.l2, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
	p.emit(localEvent(ami.EventLocalBridge, x.l1, x.l2, "Context", ctx, "Exten", exten, "LocalOptimization", "Yes"))
	x.l1.conNum, x.l1.conName = t.cidNum, t.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, x.l1))
	c.enter(x.br2, x.l1)
	c.leave(t)
	c.enter(x.br2, t)
	t.conNum, t.conName = exten, ""
	p.emit(chanEvent(ami.EventNewConnectedLine, t))
	d := p.newChannel(c, exten)
	d.linkedid = t.linkedid
	d.exten = "s"
	d.app, d.appData = "AppDial", "(Outgoing Line)"
	d.tcp = ct.tcp
	d.dialler = x.l2
	x.d = d
	p.emit(chanEvent(ami.EventNewchannel, d))
	x.l2.app, x.l2.appData = "Dial", "PJSIP/"+exten+","+fmt.Sprint(int(p.cfg.RingTimeout/time.Second))+",tT"
	d.exten = exten
	d.conNum, d.conName = x.l2.cidNum, x.l2.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, d))
	p.emit(dialEvent(ami.EventDialBegin, x.l2, d, "DialString", exten))
	x.l2.conNum, x.l2.conName = d.cidNum, d.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, x.l2))
	t.conNum, t.conName = d.cidNum, d.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, t))
	c.invite(d, ct, t.cidNum, t.cidName, t.sdp)
	p.mu.Unlock()
	return c.consultLoop(a, b, x, target, lastData)
}

// consultLoop waits for the target's answer and then for the end of the
// consultation.
func (c *call) consultLoop(a, b *channel, x *consult, target, lastData string) (*channel, string) {
	p := c.p
	ring := time.NewTimer(p.cfg.RingTimeout)
	defer ring.Stop()
	for {
		select {
		case e := <-c.events:
			switch {
			case e.ch == x.d && e.kind == evResponse && e.res.IsProvisional():
				c.consultRinging(x)
			case e.ch == x.d && e.kind == evResponse:
				c.consultAnswered(x, e.res.Body())
				if x.blond {
					return c.blondAnswered(x)
				}
			case x.blond:
				if ch := blondEnd(x, e); ch != nil {
					return c.blondFailed(x, ch)
				}
			case e.ch == x.d && (e.kind == evFail || e.kind == evBye || e.kind == evNoAck || e.kind == evHangup),
				(e.ch == x.l1 || e.ch == x.l2) && e.kind == evHangup:
				// The target refused, or the consult's leg was hung up
				// (atxfer_cancel): the transferer is back with the transferee.
				return c.consultFailed(a, b, x, target, lastData)
			case e.ch == x.t && x.up && (e.kind == evBye || e.kind == evHangup):
				return c.completeAtxfer(x, e.kind != evBye)
			case e.ch == x.t && (e.kind == evBye || e.kind == evHangup):
				// The transferer left while the target rings: a blonde
				// transfer (blond.go).
				c.blondMerge(x, e.kind != evBye)
			case (e.ch == x.t || e.ch == x.y || (c.lx != nil && c.lx.far(e.ch, x.t))) && (e.kind == evBye || e.kind == evHangup || e.kind == evNoAck):
				// The transferee left, or the transferer's dialog failed:
				// the consultation ends with the call.
				c.consultGone(a, b, x, e.ch, e.kind != evBye, target, lastData)
				return nil, ""
			}
		case <-ring.C:
			switch {
			case x.up:
			case x.blond:
				return c.blondFailed(x, x.d)
			default:
				return c.consultFailed(a, b, x, target, lastData)
			}
		case <-c.ctx.Done():
			if x.blond {
				return c.blondFailed(x, x.d)
			}
			c.consultGone(a, b, x, x.t, true, target, lastData)
			return nil, ""
		}
	}
}

func (c *call) consultRinging(x *consult) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d, l1, l2 := x.d, x.l1, x.l2
	if d.state == stateRinging || d.state == stateUp {
		return
	}
	d.state = stateRinging
	p.emit(chanEvent(ami.EventNewstate, d))
	p.updateDevice(d.endpoint)
	l1.state = stateRinging
	p.emit(chanEvent(ami.EventNewstate, l1))
	l1.cidNum, l1.cidName = d.cidNum, d.cidName
	p.emit(chanEvent(ami.EventNewCallerid, l1, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
	p.emit(dialEvent(ami.EventDialState, l2, d, "DialStatus", "RINGING"))
	p.emit(dialEvent(ami.EventDialState, nil, l1, "DialStatus", "RINGING"))
}

func (c *call) consultAnswered(x *consult, sdp []byte) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d, l1, l2 := x.d, x.l1, x.l2
	x.up = true
	d.state, d.answered, d.sdp = stateUp, p.cfg.Now(), sdp
	p.emit(chanEvent(ami.EventNewstate, d))
	p.updateDevice(d.endpoint)
	d.exten = ""
	p.emit(dialEvent(ami.EventDialEnd, l2, d, "DialStatus", "ANSWER"))
	l2.state, l2.answered = stateUp, d.answered
	p.emit(chanEvent(ami.EventNewstate, l2))
	x.br3 = &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
	p.emit(bridgeEvent(ami.EventBridgeCreate, x.br3, nil))
	l1.state, l1.answered = stateUp, d.answered
	p.emit(chanEvent(ami.EventNewstate, l1))
	p.emit(dialEvent(ami.EventDialEnd, nil, l1, "DialStatus", "ANSWER"))
	c.enter(x.br3, d)
	c.enter(x.br3, l2)
	c.mediaTo(x.t, sdp) // the transferer talks with the target
}

// completeAtxfer: t hung up while talking with the target; y and the
// target are connected. bye: t's dialog still needs our BYE.
func (c *call) completeAtxfer(x *consult, bye bool) (*channel, string) {
	p := c.p
	p.mu.Lock()
	c.mergeAtxfer(x, bye)
	c.optimiseAtxfer(x)
	p.mu.Unlock()
	// The transferee and the target talk; the target is the dialled side.
	return c.resume(x.y, x.d, x.y.exten)
}

// mergeAtxfer ends the transferer's part (it hung up): the consult bridge
// merges into the held one, the transferee is off hold and the transfer
// is reported (AttendedTransfer Success), the transferer hangs up. The
// target may still ring (a blonde transfer). p.mu held.
func (c *call) mergeAtxfer(x *consult, bye bool) {
	p := c.p
	t, y, d, l1 := x.t, x.y, x.d, x.l1
	p.hangupRequest(t, 16)
	if bye {
		c.sendBye(t, true)
	}
	c.leave(t)
	hs := amievent.Head(ami.EventBridgeMerge, "call,all", 16)
	hs = bridgeHeaders(hs, "To", x.br1)
	hs = bridgeHeaders(hs, "From", x.br2)
	p.emit(ami.NewMessage(hs...))
	c.leave(l1)
	c.enter(x.br1, l1)
	y.onHold = false
	p.emit(chanEvent(ami.EventMusicOnHoldStop, y))
	p.updateDevice(y.endpoint)
	hs = amievent.Head(ami.EventAttendedTransfer, "call,all", 100)
	hs = append(hs, ami.Header{Key: "Result", Value: "Success"})
	hs = chanHeaders(hs, "OrigTransferer", t)
	hs = bridgeHeaders(hs, "Orig", x.br1)
	hs = chanHeaders(hs, "SecondTransferer", t)
	hs = bridgeHeaders(hs, "Second", x.br2)
	hs = chanHeaders(hs, "Transferee", y)
	if !y.dialplan {
		// A called transferee's transfer names its target
		// (atxfer_complete); a calling one's does not
		// (attended_transfer_atxfer).
		hs = chanHeaders(hs, "TransferTarget", l1)
	}
	hs = append(hs, ami.Header{Key: "IsExternal", Value: "No"}, ami.Header{Key: "DestType", Value: "Bridge"},
		ami.Header{Key: "DestBridgeUniqueid", Value: x.br1.id})
	p.emit(ami.NewMessage(hs...))
	y.conNum, y.conName = d.cidNum, d.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, y))
	if t.dialplan {
		p.emit(chanEvent(ami.EventSoftHangupRequest, t, "Cause", "16")) // its dialplan ends
	}
	l1.conNum, l1.conName = y.cidNum, y.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, l1))
	p.emit(bridgeEvent(ami.EventBridgeDestroy, x.br2, nil))
	x.br2 = nil
	x.merged = p.cfg.Now()
	c.transferCdrs(x, x.merged)
	c.hangupChannel(t, 16, 0)
	d.conNum, d.conName = y.cidNum, y.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, d))
}

// optimiseAtxfer: the target answered and the transferee is in the merged
// bridge with ;1, the Local pair optimises away. A transferee that runs a
// dialplan (the caller) moves to the target's bridge; a called transferee
// stays and the target moves to it (attended_transfer_atxfer,
// atxfer_complete). p.mu held.
func (c *call) optimiseAtxfer(x *consult) {
	p := c.p
	y, d, l1, l2 := x.y, x.d, x.l1, x.l2
	now := x.merged
	if x.blond {
		now = p.cfg.Now() // the target answered after the merge
	}
	moved, into, from := d, x.br1, x.br3
	if y.dialplan {
		moved, into, from = y, x.br3, x.br1
	}
	p.emit(localEvent(ami.EventLocalOptimizationBegin, l1, l2, append(chanKV("Source", moved), "DestUniqueId", l2.uniqueid, "Id", "0")...))
	if moved == d {
		c.leave(d)
		c.leave(l1)
		c.enterSwap(into, d, l1)
		l2.cidNum, l2.cidName = y.cidNum, y.cidName
		p.emit(chanEvent(ami.EventNewCallerid, l2, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
		p.emit(localEvent(ami.EventLocalOptimizationEnd, l1, l2, "Success", "No", "Id", "0"))
		p.hangupRequest(l2, 16)
		c.hangupChannel(l1, 16, 0)
		c.leave(l2)
	} else {
		c.leave(y)
		l2.cidNum, l2.cidName = y.cidNum, y.cidName
		p.emit(chanEvent(ami.EventNewCallerid, l2, "CID-CallingPres", "0 (Presentation Allowed, Not Screened)"))
		c.leave(l2)
		c.enterSwap(into, y, l2)
		p.emit(localEvent(ami.EventLocalOptimizationEnd, l1, l2, "Success", "No", "Id", "0"))
		c.leave(l1)
		p.hangupRequest(l2, 16)
		c.hangupChannel(l1, 16, 0)
	}
	p.emit(bridgeEvent(ami.EventBridgeDestroy, from, nil))
	x.br3 = nil
	p.emit(chanEvent(ami.EventSoftHangupRequest, l2, "Cause", "16"))
	c.hangupChannel(l2, 16, 0)
	// The Local pair's own Cdrs: ;1 from the merge (bridged with a called
	// transferee that stays, alone when the transferee moves), ;2's Dial.
	if moved == d {
		p.cdrRecord(l1, l1.exten, y.name, "", "", now, now, now, "ANSWERED")
		d.cdrStart = now // d's Cdr with y starts here (see hangupBridged)
	} else {
		p.cdrRecord(l1, l1.exten, "", "", "", now, now, now, "ANSWERED")
	}
	p.cdrRecord(l2, l2.exten, d.name, "Dial", l2.appData, l2.created, d.answered, now, "ANSWERED")
	c.mediaTo(y, d.sdp) // each was talking to the transferer
	c.mediaTo(d, y.sdp)
}

// transferCdrs splits the Cdrs at a completed attended transfer, as
// Asterisk's cdr engine does (atxfer_complete,
// attended_transfer_atxfer): a transferer that dialled reports its call
// with the transferee and its consultation (to ;1); a called transferer
// only its consultation (AppDial). A transferee that dialled gets its call
// with the transferer and its time with ;1 as segments, and the call with
// the target after. p.mu held.
func (c *call) transferCdrs(x *consult, now time.Time) {
	p := c.p
	t, y, l1 := x.t, x.y, x.l1
	if t.dialplan {
		t.splitCdr(y, t.appData, x.started)
		p.cdrAt(t, t.exten, l1.name, "Dial", t.appData, x.started, now, "ANSWERED")
	} else {
		p.cdrRecord(t, "", l1.name, "AppDial", "(Outgoing Line)", x.started, x.started, now, "ANSWERED")
	}
	if y.dialplan {
		y.splitCdr(t, y.appData, x.started)
		y.cdrParts = append(y.cdrParts, cdrPart{destCh: l1.name, data: y.appData, start: x.started, answer: x.started, end: now})
		y.cdrStart = now
	}
}

// cdrStartOf is when ch's current Cdr began.
func cdrStartOf(ch *channel) time.Time {
	if !ch.cdrStart.IsZero() {
		return ch.cdrStart
	}
	return ch.created
}

// chanKV is a channel block as key/value pairs, keys prefixed.
func chanKV(prefix string, ch *channel) []string {
	var kv []string
	for _, h := range chanHeaders(nil, prefix, ch) {
		kv = append(kv, h.Key, h.Value)
	}
	return kv
}

// consultDrop ends the consultation's channels (target, Local pair,
// consult bridges) without completing the transfer. p.mu not held.
func (c *call) consultDrop(x *consult) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.d != nil && !x.d.gone {
		if x.up {
			c.sendBye(x.d, true)
		} else {
			x.d.cancelCli()
		}
		c.leave(x.d)
		if x.l2 != nil {
			p.emit(dialEvent(ami.EventDialEnd, x.l2, x.d, "DialStatus", "CANCEL"))
		}
		c.hangupChannel(x.d, 16, 0)
	}
	for _, l := range []*channel{x.l2, x.l1} {
		if l != nil && !l.gone {
			c.leave(l)
			c.hangupChannel(l, 16, 0)
		}
	}
	for _, br := range []*bridge{x.br3, x.br2} {
		if br != nil {
			p.emit(bridgeEvent(ami.EventBridgeDestroy, br, nil))
		}
	}
	x.br2, x.br3 = nil, nil
}

// consultFailed: the target did not answer or hung up; t is back with y,
// off hold, and the call goes on.
func (c *call) consultFailed(a, b *channel, x *consult, target, lastData string) (*channel, string) {
	c.consultBack(x)
	return c.resume(a, b, target)
}

// consultBack ends the consultation: t is back with y, off hold.
func (c *call) consultBack(x *consult) {
	p := c.p
	br2 := x.br2
	x.br2 = nil
	c.consultDrop(x)
	p.mu.Lock()
	t, y := x.t, x.y
	if t.bridge != x.br1 {
		c.leave(t)
		c.enter(x.br1, t)
	}
	if br2 != nil {
		p.emit(bridgeEvent(ami.EventBridgeDestroy, br2, nil))
	}
	t.conNum, t.conName = y.cidNum, y.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, t))
	c.mediaTo(t, y.sdp) // back to the transferee
	p.emit(chanEvent(ami.EventUnhold, t))
	y.onHold = false
	p.emit(chanEvent(ami.EventMusicOnHoldStop, y))
	p.updateDevice(y.endpoint)
	p.mu.Unlock()
}
