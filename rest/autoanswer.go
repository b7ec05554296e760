package rest

// Auto-answer: the first leg of a call ctibridge originates for a user
// (click-to-call, pickup, spy, a parked call picked up) rings the user's
// own phone, which the user just asked for: a desk phone told so
// answers it at once instead. The header the phone's vendor honours is
// chosen by the phone's SIP user agent (Config.AutoAnswer), set with
// chan_pjsip's PJSIP_HEADER on the Originate; a user in AutoAnswer.Off
// keeps a ringing phone, and a phone no rule names is left alone.

import (
	"fmt"
	"strings"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// The headers a rule may choose.
const (
	// AnswerCallInfo is Call-Info with answer-after=0 (Yealink, Snom,
	// Fanvil, Grandstream, Cisco SPA, Gigaset and most others).
	AnswerCallInfo = "call-info"
	// AnswerAlertInfo is an Alert-Info asking for auto-answer
	// (info=alert-autoanswer: Polycom with the matching alertInfo
	// class, older Snom and Grandstream).
	AnswerAlertInfo = "alert-info"
)

// autoAnswerHeaders are the Originate Variable values of each header.
var autoAnswerHeaders = map[string]string{
	AnswerCallInfo:  "PJSIP_HEADER(add,Call-Info)=<uri>;answer-after=0",
	AnswerAlertInfo: "PJSIP_HEADER(add,Alert-Info)=<http://127.0.0.1>;info=alert-autoanswer;delay=0",
}

// AutoAnswer says which phones are told to answer ctibridge's calls to
// their user at once.
type AutoAnswer struct {
	// Rules are tried in order; the first whose UserAgent starts the
	// phone's (case-insensitive; "*" matches any) names the header.
	Rules []AutoAnswerRule
	// Off names the users whose phones ring as before.
	Off map[string]bool
}

// AutoAnswerRule maps a SIP user agent prefix to AnswerCallInfo or
// AnswerAlertInfo.
type AutoAnswerRule struct {
	UserAgent, Header string
}

// DefaultAutoAnswerRules is the table of --auto-answer's "default".
const DefaultAutoAnswerRules = "yealink:call-info,snom:call-info,fanvil:call-info,grandstream:call-info,cisco:call-info,gigaset:call-info,polycom:alert-info,pbxsim-phone:call-info"

// ParseAutoAnswerRules reads a table "<user agent prefix>:<header>,...";
// "default" is DefaultAutoAnswerRules, "" or "off" none.
func ParseAutoAnswerRules(s string) ([]AutoAnswerRule, error) {
	switch strings.TrimSpace(s) {
	case "", "off":
		return nil, nil
	case "default":
		s = DefaultAutoAnswerRules
	}
	var rules []AutoAnswerRule
	for _, item := range strings.Split(s, ",") {
		ua, hdr, ok := strings.Cut(strings.TrimSpace(item), ":")
		ua, hdr = strings.TrimSpace(ua), strings.ToLower(strings.TrimSpace(hdr))
		if !ok || ua == "" {
			return nil, fmt.Errorf("auto-answer rule %q: want <user agent prefix>:<%s|%s>", item, AnswerCallInfo, AnswerAlertInfo)
		}
		if _, known := autoAnswerHeaders[hdr]; !known {
			return nil, fmt.Errorf("auto-answer rule %q: header %q is neither %s nor %s", item, hdr, AnswerCallInfo, AnswerAlertInfo)
		}
		rules = append(rules, AutoAnswerRule{UserAgent: ua, Header: hdr})
	}
	return rules, nil
}

// autoAnswer returns the Originate headers that make user u's phone x
// answer at once, or nil.
func (h *handler) autoAnswer(u *auth.User, x calls.Extension) []string {
	a := h.cfg.AutoAnswer
	if a == nil || a.Off[u.Username] || x.SIPUserAgent == "" {
		return nil
	}
	ua := strings.ToLower(x.SIPUserAgent)
	for _, r := range a.Rules {
		if r.UserAgent == "*" || strings.HasPrefix(ua, strings.ToLower(r.UserAgent)) {
			return []string{"Variable", autoAnswerHeaders[r.Header]}
		}
	}
	return nil
}
