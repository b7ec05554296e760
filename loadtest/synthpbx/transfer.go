// The transfers of an answered internal call: blind (Redirect) and
// attended (Transfer, the target's answer, Complete).

package synthpbx

import (
	"fmt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// Redirect blind-transfers an answered internal call's caller to
// extension to with AMI Redirect (the shape of
// calls/testdata/blind_transfer_redirect): the bridge breaks, B is hung
// up, A's channel runs the dialplan again and dials to, who rings.
func (p *PBX) Redirect(c *Call, to int) {
	if c.state != up || c.A < 0 || c.B < 0 {
		return
	}
	tn := Exten(to)
	c.ca.Exten = tn
	br := c.ca.Bridge
	p.leave(c.ca, 1)
	p.leave(c.cb, 0)
	p.destroy(br)
	p.hangup(c.cb, "16", "Normal Clearing")
	c.drop(c.cb)
	p.setStatus(c.B, 0)
	c.release(c.B)
	p.dialplanEv(ami.EventNewexten, c.ca, "Extension", tn, "Application", "Dial", "AppData", "PJSIP/"+tn+",,Tt")
	c.B, c.C = to, to
	c.cb = p.extChan(c, to, c.ca.Linked, "s", 0)
	p.ring(c, c.ca, c.cb, tn, to)
	c.state = ringing
}

// Transfer starts an attended transfer of an answered internal call by
// its caller to extension to (Atxfer, the shape of
// calls/testdata/atxfer_complete): B is held in the call's bridge, A
// moves to a consult bridge with a Local pair whose ;2 dials to.
func (p *PBX) Transfer(c *Call, to int) {
	if c.state != up || c.A < 0 || c.B < 0 {
		return
	}
	a, b := c.ca, c.cb
	tn := Exten(to)
	c.C = to
	p.chanEv(ami.EventHold, a)
	p.chanEv(ami.EventMusicOnHoldStart, b, "Class", "default")
	p.setStatus(c.B, 16)
	p.seq++
	lname := fmt.Sprintf("Local/%s@from-internal-%08x;", tn, p.seq)
	l1 := c.add(p.named(lname+"1", "", "", a.Linked, "from-internal", tn, 0))
	l2 := c.add(p.named(lname+"2", "", "", a.Linked, "from-internal", tn, 4))
	c.local = [2]*Chan{l1, l2}
	p.chanEv(ami.EventNewchannel, l1)
	p.chanEv(ami.EventNewchannel, l2)
	c.bridges[1] = p.newBridge()
	l2.Num, l2.CIDName = a.Num, a.CIDName
	p.chanEv(ami.EventNewCallerid, l2, "CID-CallingPres", cidPres)
	p.localEv(ami.EventLocalBridge, c, nil, "Context", "from-internal", "Exten", tn, "LocalOptimization", "Yes")
	l1.Conn, l1.ConnName = a.Num, a.CIDName
	p.chanEv(ami.EventNewConnectedLine, l1)
	p.enter(l1, c.bridges[1], 1)
	p.leave(a, 1)
	p.enter(a, c.bridges[1], 2)
	cc := p.extChan(c, to, a.Linked, "s", 0)
	c.consult = cc
	cc.App = "AppDial"
	p.chanEv(ami.EventNewchannel, cc)
	cc.Conn, cc.ConnName, cc.Exten = a.Num, a.CIDName, tn
	p.chanEv(ami.EventNewConnectedLine, cc)
	p.dialEv(ami.EventDialBegin, l2, cc, "DialString", tn)
	c.dials = append(c.dials, [2]*Chan{l2, cc}, [2]*Chan{nil, l1})
	l2.Conn, l2.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, l2)
	a.Conn, a.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, a)
	cc.State = 5
	p.chanEv(ami.EventNewstate, cc)
	l1.State = 5
	p.chanEv(ami.EventNewstate, l1)
	p.setStatus(to, 8)
	p.dialEv(ami.EventDialState, l2, cc, "DialStatus", "RINGING")
	p.dialEv(ami.EventDialState, nil, l1, "DialStatus", "RINGING")
	c.state = consulting
}

// localEv emits an event about the call's Local pair (LocalOne*,
// LocalTwo*), with src as Source* when not nil.
func (p *PBX) localEv(name string, c *Call, src *Chan, kv ...string) {
	hs := amievent.AppendChannel(amievent.Head(name, "call,all", 48+len(kv)/2), "LocalOne", &c.local[0].Channel)
	hs = amievent.AppendChannel(hs, "LocalTwo", &c.local[1].Channel)
	if src != nil {
		hs = amievent.AppendChannel(hs, "Source", &src.Channel)
	}
	p.send(ami.NewMessage(amievent.AppendPairs(hs, kv...)...))
}

func (p *PBX) answerConsult(c *Call) {
	l1, l2, cc := c.local[0], c.local[1], c.consult
	cc.State = 6
	p.chanEv(ami.EventNewstate, cc)
	p.dialEv(ami.EventDialEnd, l2, cc, "DialStatus", "ANSWER")
	l2.State = 6
	p.chanEv(ami.EventNewstate, l2)
	c.bridges[2] = p.newBridge()
	l1.State = 6
	p.chanEv(ami.EventNewstate, l1)
	p.dialEv(ami.EventDialEnd, nil, l1, "DialStatus", "ANSWER")
	c.dials = nil
	p.enter(cc, c.bridges[2], 1)
	p.setStatus(c.C, 1)
	p.enter(l2, c.bridges[2], 2)
	c.state = consulted
}

// Complete ends an attended transfer whose target answered: the
// transferer hangs up, the consult bridge merges into the original one,
// and the Local pair optimises itself away, leaving B talking to C.
func (p *PBX) Complete(c *Call) {
	if c.state != consulted {
		return
	}
	a, b, l1, l2, cc := c.ca, c.cb, c.local[0], c.local[1], c.consult
	orig, second := c.bridges[0], c.bridges[1]
	p.chanEv(ami.EventHangupRequest, a, "Cause", "16")
	p.leave(a, 1)
	merge := amievent.AppendBridge(amievent.Head(ami.EventBridgeMerge, "call,all", 16), "To", basic(orig, 1))
	p.send(ami.NewMessage(amievent.AppendBridge(merge, "From", basic(second, 1))...))
	p.leave(l1, 0)
	p.enter(l1, orig, 2)
	p.setStatus(c.B, 1)
	p.chanEv(ami.EventMusicOnHoldStop, b)
	hs := amievent.Head(ami.EventAttendedTransfer, "call,all", 100)
	hs = append(hs, ami.Header{Key: "Result", Value: "Success"})
	hs = amievent.AppendBridge(amievent.AppendChannel(hs, "OrigTransferer", &a.Channel), "Orig", basic(orig, 2))
	hs = amievent.AppendBridge(amievent.AppendChannel(hs, "SecondTransferer", &a.Channel), "Second", basic(second, 0))
	hs = amievent.AppendChannel(amievent.AppendChannel(hs, "Transferee", &b.Channel), "TransferTarget", &l1.Channel)
	p.send(ami.NewMessage(amievent.AppendPairs(hs, "IsExternal", "No", "DestType", "Bridge", "DestBridgeUniqueid", orig)...))
	b.Conn, b.ConnName = cc.Num, cc.CIDName
	p.chanEv(ami.EventNewConnectedLine, b)
	p.chanEv(ami.EventSoftHangupRequest, a, "Cause", "16")
	l1.Conn, l1.ConnName = b.Num, b.CIDName
	p.chanEv(ami.EventNewConnectedLine, l1)
	p.destroy(second)
	p.setStatus(c.A, 0)
	p.hangup(a, "16", "Normal Clearing")
	c.drop(a)
	c.release(c.A)
	cc.Conn, cc.ConnName = b.Num, b.CIDName
	p.chanEv(ami.EventNewConnectedLine, cc)
	p.localEv(ami.EventLocalOptimizationBegin, c, cc, "DestUniqueId", l2.UID, "Id", "0")
	p.leave(cc, 1)
	p.leave(l1, 1)
	p.enter(cc, orig, 2)
	l2.Num, l2.CIDName = b.Num, b.CIDName
	p.chanEv(ami.EventNewCallerid, l2, "CID-CallingPres", cidPres)
	p.localEv(ami.EventLocalOptimizationEnd, c, nil, "Success", "No", "Id", "0")
	p.chanEv(ami.EventHangupRequest, l2, "Cause", "16")
	p.hangup(l1, "16", "Normal Clearing")
	p.leave(l2, 0)
	p.destroy(c.bridges[2])
	p.chanEv(ami.EventSoftHangupRequest, l2, "Cause", "16")
	p.hangup(l2, "16", "Normal Clearing")
	c.drop(l1)
	c.drop(l2)
	c.ca, c.cb, c.A, c.B = b, cc, c.B, c.C
	c.local, c.consult = [2]*Chan{}, nil
	c.state = up
}
