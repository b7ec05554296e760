package pbxsim

// Auto-answer: an Originate may add SIP headers to the INVITE of its
// first party (Variable: PJSIP_HEADER(add,<name>)=<value>, as chan_pjsip
// takes them), and a simulated phone told to auto-answer by one of them
// answers at once, without ringing, as desk phones do for click-to-call
// and intercom: Call-Info with answer-after=0 (Yealink, Snom,
// Grandstream, Fanvil...) or Alert-Info naming auto-answer (Polycom's
// and others' "Auto Answer" / info=alert-autoanswer).

import (
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/ctibridge/ctibridge/ami"
)

// extraHeaders are SIP headers added to a channel's INVITE.
type extraHeaders []sip.Header

// originateHeaders returns the headers an Originate's Variable lines ask
// chan_pjsip to add; other variables are ignored (pbxsim has no channel
// variables to set).
func originateHeaders(req ami.Message) extraHeaders {
	var hs extraHeaders
	for _, v := range req.Values("Variable") {
		// One Variable line may carry several, comma-separated, in
		// Asterisk's older form; PJSIP_HEADER's own comma is inside ().
		for _, kv := range splitVars(v) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			arg, ok := strings.CutPrefix(strings.TrimSpace(k), "PJSIP_HEADER(")
			arg, ok2 := strings.CutSuffix(arg, ")")
			op, name, ok3 := strings.Cut(arg, ",")
			if !ok || !ok2 || !ok3 || !strings.EqualFold(strings.TrimSpace(op), "add") || strings.TrimSpace(name) == "" {
				continue
			}
			hs = append(hs, sip.NewHeader(strings.TrimSpace(name), val))
		}
	}
	return hs
}

// splitVars splits a Variable value at the commas outside parentheses.
func splitVars(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// autoAnswer reports an INVITE that tells the phone to answer at once.
func autoAnswer(req *sip.Request) bool {
	for _, h := range req.GetHeaders("Call-Info") {
		for _, p := range strings.Split(h.Value(), ";") {
			if k, v, _ := strings.Cut(strings.TrimSpace(p), "="); strings.EqualFold(k, "answer-after") && strings.TrimSpace(v) == "0" {
				return true
			}
		}
	}
	for _, h := range req.GetHeaders("Alert-Info") {
		v := strings.ToLower(h.Value())
		if strings.Contains(v, "auto-answer") || strings.Contains(v, "auto answer") || strings.Contains(v, "autoanswer") {
			return true
		}
	}
	return false
}
