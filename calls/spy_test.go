package calls

import (
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

func TestSpyMode(t *testing.T) {
	for data, want := range map[string]string{
		"PJSIP/201-00000000,qE": "listen", "PJSIP/201-00000000,qEB": "barge", "PJSIP/201-00000000,qEw": "whisper",
		"qW": "whisper", "": "listen", "PJSIP/201-1,g(B)": "listen",
	} {
		if got := spyMode(data); got != want {
			t.Errorf("spyMode(%q) = %q, want %q", data, got, want)
		}
	}
}

// TestSpySession: while Alice (201) talks to Bob (202) as recorded, the
// intrude action's Originate rings 203 and runs ChanSpy(Alice's channel,qEB).
// No recording of ChanSpy exists yet: its events are built with the headers
// Asterisk 22 sends (ChanSpyStart: Spyer*/Spyee* channel fields;
// OriginateResponse: Application, Data). The spy's screen shows 201 as the
// counterpart, never itself; Alice's and Bob's conversations do not change.
func TestSpySession(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs[:msgIndex(t, rec, "BridgeEnter Channel=PJSIP/201-00000000")+1] {
		clk.Observe(m)
		e.Apply(m)
	}
	before := e.Publish()
	spy, alice := "PJSIP/203-00000009", "PJSIP/201-00000000"
	leg := func(ev string, kv ...string) ami.Message {
		return amitest.Event(ev, append([]string{"Channel", spy, "ChannelState", "0", "CallerIDNum", "203", "CallerIDName", "<unknown>",
			"ConnectedLineNum", "203", "ConnectedLineName", "<unknown>", "Context", "from-internal", "Exten", "s",
			"Uniqueid", "1796028450.9", "Linkedid", "1796028450.9"}, kv...)...)
	}
	for _, m := range []ami.Message{
		leg("Newchannel", "AccountCode", ""),
		leg("NewAccountCode", "AccountCode", "201"), // the Originate's Account, as in originate_click_to_call
		amitest.Event("DialBegin", "DestChannel", spy, "DestUniqueid", "1796028450.9", "DialString", "203"),
		leg("Newstate", "ChannelState", "5"),
	} {
		e.Apply(m)
	}
	s := e.Publish()
	if n := len(s.Extensions.Get("203").Conversations); n != 1 {
		t.Fatalf("203 ringing for the spy session: %d conversations", n)
	}
	for _, cv := range s.Extensions.Get("203").Conversations {
		if cv.CounterpartNum != "201" || cv.Direction != "out" {
			t.Errorf("203's ringing spy leg: %+v (want 201 as counterpart, out)", cv)
		}
	}
	for _, m := range []ami.Message{
		leg("Newstate", "ChannelState", "6"),
		amitest.Event("OriginateResponse", "Response", "Success", "Channel", spy, "Application", "ChanSpy",
			"Data", alice+",qEB", "Reason", "4", "Uniqueid", "1796028450.9"),
		amitest.Event("ChanSpyStart", "SpyerChannel", spy, "SpyerUniqueid", "1796028450.9", "SpyerCallerIDNum", "203",
			"SpyeeChannel", alice, "SpyeeUniqueid", "1796028439.0", "SpyeeCallerIDNum", "201"),
	} {
		e.Apply(m)
	}
	s = e.Publish()
	for _, cv := range s.Extensions.Get("203").Conversations {
		if cv.Extras().Spy != (Spy{Exten: "201", Mode: "barge"}) || cv.CounterpartNum != "201" || !cv.Connected || cv.ID != spy+">"+alice {
			t.Errorf("spy conversation: %+v", cv)
		}
	}
	for _, x := range []string{"201", "202"} {
		if !convsEqual(before.Extensions.Get(x).Conversations, s.Extensions.Get(x).Conversations) {
			t.Errorf("%s's conversations changed: %v -> %v", x, before.Extensions.Get(x).Conversations, s.Extensions.Get(x).Conversations)
		}
	}
	if b := string(s.ExtensionJSON("203")); !strings.Contains(b, `"spy":{"exten":"201","mode":"barge"}`) {
		t.Errorf("203 JSON: %s", b)
	}
	e.Apply(amitest.Event("ChanSpyStop", "SpyerChannel", spy, "SpyerUniqueid", "1796028450.9", "SpyeeChannel", alice))
	for _, cv := range e.Publish().Extensions.Get("203").Conversations {
		if cv.Extras().Spy != (Spy{}) {
			t.Errorf("after ChanSpyStop: %+v", cv)
		}
	}
}
