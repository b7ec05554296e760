package rest

import (
	"strings"
	"testing"
)

// TestParseAutoAnswerRules: the table of --auto-answer; a bad entry is a
// clear error naming it.
func TestParseAutoAnswerRules(t *testing.T) {
	for _, s := range []string{"", "off"} {
		if r, err := ParseAutoAnswerRules(s); err != nil || r != nil {
			t.Errorf("%q: %v %v, want none", s, r, err)
		}
	}
	r, err := ParseAutoAnswerRules("default")
	if err != nil || len(r) < 5 || r[0] != (AutoAnswerRule{"yealink", AnswerCallInfo}) {
		t.Errorf("default: %v %v", r, err)
	}
	r, err = ParseAutoAnswerRules(" Polycom : Alert-Info , *:call-info")
	if err != nil || len(r) != 2 || r[0] != (AutoAnswerRule{"Polycom", AnswerAlertInfo}) || r[1] != (AutoAnswerRule{"*", AnswerCallInfo}) {
		t.Errorf("custom: %v %v", r, err)
	}
	for _, bad := range []string{"yealink", ":call-info", "snom:intercom", "yealink:call-info,,"} {
		if _, err := ParseAutoAnswerRules(bad); err == nil || !strings.Contains(err.Error(), "auto-answer rule") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}
