package rest

import (
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/rest/resttest"
)

// TestTransferCellphoneAndVoicemail: transfer_cellphone redirects the
// other party to the cellphone of the user whose main extension is "to";
// an extension without a cellphone or a mailbox is a 409, sending nothing.
func TestTransferCellphoneAndVoicemail(t *testing.T) {
	f := newFixture(t, true, withCellphone(t))
	r := f.do("POST", "/astproxy/transfer_cellphone", "root", `{"convid":"`+conv2000+`","endpointId":"2000","to":"2001"}`)
	if r.status != 200 {
		t.Fatalf("transfer_cellphone: %d %s", r.status, r.body)
	}
	sent := f.sent()
	want := "Action: Redirect\nChannel: " + resttest.Chan(1) + "\nContext: from-internal\nExten: 3331234567\nPriority: 1\n"
	if len(sent) != 1 || headers(sent[0]) != want {
		t.Fatalf("sent %d actions, want:\n%s", len(sent), want)
	}
	for _, c := range []struct{ route, to, code string }{
		{"transfer_cellphone", "2003", "conflict"},
		{"transfer_voicemail", "2003", "conflict"}, // the synthetic PBX has no mailboxes
		{"transfer_voicemail", "2999", "not_found"},
		{"transfer_cellphone", "vmu2001", "bad_request"},
	} {
		r := f.do("POST", "/astproxy/"+c.route, "root", `{"convid":"`+conv2000+`","endpointId":"2000","to":"`+c.to+`"}`)
		if r.errorCode() != c.code {
			t.Errorf("%s to %s: %d %s, want %s", c.route, c.to, r.status, r.body, c.code)
		}
	}
	// Only on a call one may transfer: alice (2000) not on 2001's.
	if r := f.do("POST", "/astproxy/transfer_cellphone", "alice", `{"convid":"`+conv2000+`","endpointId":"2001","to":"2001"}`); r.status != 403 {
		t.Errorf("alice transfers 2001's call: %d %s", r.status, r.body)
	}
	if n := len(f.sent()); n != 1 {
		t.Errorf("%d actions sent after the refusals, want 1", n)
	}
}

// TestMePopupLinkAndMobiles: /user/me carries the pop-up's link template
// and, for a user who may transfer, the extensions with a cellphone.
func TestMePopupLinkAndMobiles(t *testing.T) {
	f := newFixture(t, false, func(c *Config) {
		withCellphone(t)(c)
		c.PopupLink = "https://crm.example.com/card?n={number}&who={name}"
	})
	r := f.do("GET", "/user/me", "alice", "")
	for _, want := range []string{`"popupLink":"https://crm.example.com/card?n={number}\u0026who={name}"`, `"mobiles":["2001"]`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/user/me %s lacks %s", r.body, want)
		}
	}
}

func TestCheckPopupLinkAndVoicemailExten(t *testing.T) {
	for tmpl, ok := range map[string]bool{
		"https://crm.example.com/card?n={number}": true, "http://10.0.0.1:8080/{number}/{name}": true,
		"javascript:alert({number})": false, "ftp://x/{number}": false, "/card/{number}": false, "https:///{number}": false,
	} {
		if err := CheckPopupLink(tmpl); (err == nil) != ok {
			t.Errorf("CheckPopupLink(%q) = %v", tmpl, err)
		}
	}
	for tmpl, ok := range map[string]bool{"vmu{exten}": true, "*{exten}": true, "vmu": false, "vm {exten}": false, "vm,{exten}": false} {
		if err := CheckVoicemailExten(tmpl); (err == nil) != ok {
			t.Errorf("CheckVoicemailExten(%q) = %v", tmpl, err)
		}
	}
	if _, err := NewHandler(Config{Auth: newFixture(t, false, nil).svc, State: engineState{resttest.Engine(resttest.Options{Extensions: 1})}, PopupLink: "javascript:x"}); err == nil {
		t.Error("NewHandler took a javascript: pop-up link")
	}
}
