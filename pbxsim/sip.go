package pbxsim

import (
	"github.com/emiago/sipgo/sip"
)

// allowed is the Allow header of pbxsim's answers.
const allowed = "OPTIONS, REGISTER, INVITE, ACK, BYE, CANCEL, UPDATE, REFER, NOTIFY"

// registerSIP routes SIP requests. sipgo runs each request in its own
// goroutine; malformed messages are refused by its parser and transaction
// layer (400) before they get here.
func (p *PBX) registerSIP() {
	s := p.sipSrv
	s.OnRegister(p.handleRegister)
	s.OnInvite(p.handleInvite)
	s.OnAck(p.handleAck)
	s.OnBye(p.handleBye)
	s.OnUpdate(p.handleReinvite)
	s.OnRefer(p.handleRefer)
	s.OnCancel(func(req *sip.Request, tx sip.ServerTransaction) {
		// A CANCEL matching a pending INVITE never gets here (the
		// transaction layer answers it); this one matches nothing.
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
	})
	s.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
		res.AppendHeader(sip.NewHeader("Allow", allowed))
		tx.Respond(res)
	})
	s.OnNoRoute(func(req *sip.Request, tx sip.ServerTransaction) {
		res := sip.NewResponseFromRequest(req, sip.StatusMethodNotAllowed, "Method Not Allowed", nil)
		res.AppendHeader(sip.NewHeader("Allow", allowed))
		tx.Respond(res)
	})
}
