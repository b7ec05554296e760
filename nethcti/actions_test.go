package nethcti

import (
	"slices"
	"strings"
	"testing"
)

// TestTranslatedActionsSameAsNative sends each action with the body a
// NethCTI client sends (extra fields, NethCTI's dnd and cfcall shapes) to
// the front, and the native body to the native API, as the same user:
// both must answer the same and send the PBX the same actions.
func TestTranslatedActionsSameAsNative(t *testing.T) {
	const conv = "PJSIP/201-00000036>PJSIP/202-00000037"
	cases := []struct {
		user, name, neth, native string
	}{
		{"alice", "call", `{"endpointId":"201","endpointTpe":"extension","number":"203"}`, `{"endpointId":"201","number":"203"}`},
		{"alice", "hangup", `{"convid":"` + conv + `","endpointId":"201","endpointType":"extension"}`, `{"convid":"` + conv + `","endpointId":"201"}`},
		{"alice", "park", `{"convid":"` + conv + `","endpointId":"201","applicantId":"201"}`, `{"convid":"` + conv + `","endpointId":"201"}`},
		{"alice", "blindtransfer", `{"convid":"` + conv + `","endpointId":"201","to":"204","endpointType":"extension"}`, `{"convid":"` + conv + `","endpointId":"201","to":"204"}`},
		{"alice", "start_record", `{"convid":"` + conv + `","endpointId":"201","endpointType":"extension"}`, `{"convid":"` + conv + `","endpointId":"201"}`},
		{"alice", "dnd", `{"endpoint":"201","status":"on"}`, `{"endpointId":"201","activate":true}`},
		{"alice", "cfcall", `{"endpoint":"201","type":"busy","status":"on","to":"0612345678"}`, `{"endpointId":"201","type":"busy","to":"0612345678"}`},
		{"alice", "cfcall", `{"endpoint":"201","type":"busy","status":"off","to":"0612345678"}`, `{"endpointId":"201","type":"busy"}`},
		{"alice", "queuemember_pause", `{"endpointId":"203","queueId":"support","reason":"lunch"}`, `{"endpointId":"203","queueId":"support","reason":"lunch"}`},
		// Refusals are the native ones too.
		{"carol", "hangup", `{"convid":"` + conv + `","endpointId":"201","endpointType":"extension"}`, `{"convid":"` + conv + `","endpointId":"201"}`},
		{"bob", "call", `{"endpointId":"201","endpointTpe":"extension","number":"203"}`, `{"endpointId":"201","number":"203"}`},
		{"alice", "call", `{"endpointId":"201","number":"2\n03"}`, `{"endpointId":"201","number":"2\n03"}`},
		{"alice", "pickup_conv", `{"convid":"x","endpointId":"203","destId":"201"}`, `{"endpointId":"203","destId":"201"}`},
	}
	for _, c := range cases {
		t.Run(c.user+" "+c.name+" "+c.neth, func(t *testing.T) {
			f := newFixture(t)
			got := f.apiDo("POST", "/astproxy/"+c.name, c.user, c.neth)
			gotSent := f.sent()
			g := newFixture(t)
			want := g.nativeDo("POST", "/astproxy/"+c.name, c.user, c.native)
			wantSent := g.sent()
			if got.status != want.status || got.errorCode() != want.errorCode() {
				t.Errorf("front %d %s, native %d %s", got.status, got.body, want.status, want.body)
			}
			if !slices.Equal(gotSent, wantSent) {
				t.Errorf("front sent\n%v\nnative sent\n%v", gotSent, wantSent)
			}
		})
	}
}

// TestFrontOnlyActions checks what the front sends for the actions the
// native API has no route for (written from Asterisk's PlayDTMF and
// MuteAudio manager actions and the phones' action URLs).
func TestFrontOnlyActions(t *testing.T) {
	const conv = "PJSIP/201-00000036>PJSIP/202-00000037"
	f := newFixture(t)
	steps := []struct {
		name, body string
		status     int
		sent       []string
		pressed    string
	}{
		{"dtmf", `{"convid":"` + conv + `","endpointId":"201","tone":"5"}`, 200,
			[]string{"Action: PlayDTMF\nChannel: PJSIP/202-00000037\nDigit: 5\n"}, ""},
		{"dtmf", `{"convid":"` + conv + `","endpointId":"201","tone":"55"}`, 400, nil, ""},
		{"mute", `{"convid":"` + conv + `","endpointId":"201"}`, 200,
			[]string{"Action: MuteAudio\nChannel: PJSIP/201-00000036\nDirection: in\nState: on\n"}, ""},
		{"unmute", `{"convid":"` + conv + `","endpointId":"201"}`, 200,
			[]string{"Action: MuteAudio\nChannel: PJSIP/201-00000036\nDirection: in\nState: off\n"}, ""},
		{"answer", `{"endpointId":"201","endpointType":"extension"}`, 200, nil, "http://127.0.0.1/servlet?key=OK"},
		{"toggle_hold", `{"convid":"` + conv + `","endpointId":"201"}`, 200, nil, "http://127.0.0.1/servlet?key=F_HOLD"},
		{"toggle_mute", `{"convid":"` + conv + `","endpointId":"201"}`, 200, nil, "http://127.0.0.1/servlet?key=MUTE"},
		{"recall_on_busy", `{"caller":"201","called":"202"}`, 501, nil, ""},
		{"no_such_action", `{}`, 404, nil, ""},
		{"hangup_mainexten", `{"exten":"201"}`, 200,
			[]string{"Action: Hangup\nChannel: PJSIP/201-00000036\nCause: 16\n"}, ""},
	}
	for _, s := range steps {
		before, pressedBefore := len(f.sent()), len(f.phone.pressed())
		r := f.apiDo("POST", "/astproxy/"+s.name, "alice", s.body)
		if r.status != s.status {
			t.Errorf("%s %s: %d %s, want %d", s.name, s.body, r.status, r.body, s.status)
		}
		if sent := f.sent()[before:]; !slices.Equal(sent, s.sent) {
			t.Errorf("%s sent %q, want %q", s.name, sent, s.sent)
		}
		pressed := f.phone.pressed()[pressedBefore:]
		if s.pressed == "" && len(pressed) > 0 || s.pressed != "" && !slices.Equal(pressed, []string{s.pressed}) {
			t.Errorf("%s pressed %q, want %q", s.name, pressed, s.pressed)
		}
		if s.status >= 500 && !strings.Contains(string(r.body), "message") {
			t.Errorf("%s: %d without a reason: %s", s.name, s.status, r.body)
		}
	}
	// Another user's call: refused before anything is sent.
	before := len(f.sent())
	for _, name := range []string{"dtmf", "mute", "toggle_hold", "answer"} {
		r := f.apiDo("POST", "/astproxy/"+name, "carol", `{"convid":"`+conv+`","endpointId":"201","tone":"1"}`)
		if r.status != 403 {
			t.Errorf("carol %s on 201: %d %s, want 403", name, r.status, r.body)
		}
	}
	if len(f.sent()) != before || len(f.phone.pressed()) != 3 {
		t.Errorf("refused actions reached the PBX or a phone: %v %v", f.sent()[before:], f.phone.pressed())
	}
}
