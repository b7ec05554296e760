package pbxsim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// forkToVoicemail runs a call from caller to target that rings every
// one of phones until the ring timeout, on the freepbx plan with
// mailboxes: the caller is answered by VoiceMail, leaves a message and
// hangs up. It gives the stream and the state calls.Engine showed while
// the message was recorded.
func forkToVoicemail(t *testing.T, cfg Config, caller, target string, phones []string) ([]ami.Message, string) {
	t.Helper()
	cfg.Plan, cfg.RingTimeout = PlanFreePBX, time.Second
	p := startPBX(t, cfg)
	from := startPhone(t, p, PhoneConfig{Exten: caller})
	for _, x := range phones {
		startPhone(t, p, PhoneConfig{Exten: x, NoAnswer: true})
	}
	capt := startCapture(t, p.AMIAddr())
	call, err := from.Call(ctx5(t), target) // answered by the voicemail
	if err != nil {
		t.Fatal(err)
	}
	during := capt.waitFor(t, "VoiceMail", func(m []ami.Message) bool { return count(m, "Newexten", "Application", "VoiceMail") == 1 })
	eng := calls.New(calls.Config{Devices: cfg.Devices, Trunks: []string{"trunk"}})
	eng.SetLink(calls.LinkLive)
	for _, m := range during {
		eng.Apply(m)
	}
	state := string(eng.Publish().StateJSON())
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	got := capt.waitFor(t, "the message", func(m []ami.Message) bool { return count(m, "MessageWaiting") == 1 })
	return got, state
}

// cdrSummary is each Cdr as "<destination channel's endpoint>
// <application> <disposition>", in order.
func cdrSummary(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Event() != "Cdr" || !strings.HasPrefix(m.Get("Channel"), "PJSIP/") {
			continue
		}
		dest, _, _ := strings.Cut(m.Get("DestinationChannel"), "-")
		out = append(out, dest+" "+m.Get("LastApplication")+" "+m.Get("Disposition"))
	}
	return out
}

// checkVoicemailConv checks that the engine showed caller's call
// answered by mailbox box.
func checkVoicemailConv(t *testing.T, state, caller, box string) {
	t.Helper()
	var st struct {
		Extensions map[string]struct {
			Conversations map[string]struct {
				CounterpartNum string `json:"counterpartNum"`
				Connected      bool   `json:"connected"`
				Voicemail      bool   `json:"voicemail"`
			} `json:"conversations"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		t.Fatal(err)
	}
	cs := st.Extensions[caller].Conversations
	for _, cv := range cs {
		if len(cs) == 1 && cv.Voicemail && cv.Connected && cv.CounterpartNum == box {
			return
		}
	}
	t.Errorf("%s's conversations %+v, want one, connected to the mailbox %s", caller, cs, box)
}

// TestForkVoicemailDevices: a call to a user whose two devices ring in
// vain goes to the user's voicemail, as FreePBX's macro-exten-vm does
// after the Dial of every device: both Dials end NOANSWER, VoiceMail
// answers the caller, a message is stored in the user's box; the Cdrs
// are the two devices' NO ANSWER then the VoiceMail's.
func TestForkVoicemailDevices(t *testing.T) {
	got, state := forkToVoicemail(t, Config{Mailboxes: []string{"201"}}, "203", "201", []string{"201", "91201"})
	if n := count(got, "DialEnd", "DialStatus", "NOANSWER"); n != 2 {
		t.Errorf("%d DialEnd NOANSWER, want 2 (201 and 91201)", n)
	}
	if n := count(got, "Newexten", "Application", "VoiceMail", "AppData", "201@default,u"); n != 1 {
		t.Errorf("%d Newexten VoiceMail(201@default,u), want 1", n)
	}
	if n := count(got, "MessageWaiting", "Mailbox", "201@default", "New", "1"); n != 1 {
		t.Errorf("no MessageWaiting for 201@default")
	}
	if n := count(got, "Hangup", "Cause", "16") + count(got, "Hangup", "Cause", "0"); n < 1 {
		t.Errorf("the caller was not hung up normally")
	}
	cdrs := cdrSummary(got)
	want := []string{"PJSIP/201 Dial NO ANSWER", "PJSIP/91201 Dial NO ANSWER", " VoiceMail ANSWERED"}
	if !slices.Equal(cdrs, want) {
		t.Errorf("Cdrs %q, want %q", cdrs, want)
	}
	checkVoicemailConv(t, state, "203", "201")
}

// TestForkVoicemailRingGroup: an unanswered ring group call goes to its
// destination if no answer, a member's voicemail (RingGroupVoicemail,
// the first member by default): every Local pair is hung up, VoiceMail
// answers the caller, the message is in 202's box.
func TestForkVoicemailRingGroup(t *testing.T) {
	got, state := forkToVoicemail(t, Config{Mailboxes: []string{"202"}}, "201", "610", []string{"202", "203", "204"})
	if n := count(got, "DialEnd", "DialStatus", "NOANSWER"); n != 3 {
		t.Errorf("%d DialEnd NOANSWER, want 3 (the three Local pairs)", n)
	}
	if n := count(got, "Newexten", "Application", "VoiceMail", "AppData", "202@default,u"); n != 1 {
		t.Errorf("%d Newexten VoiceMail(202@default,u), want 1", n)
	}
	if n := count(got, "MessageWaiting", "Mailbox", "202@default", "New", "1"); n != 1 {
		t.Errorf("no MessageWaiting for 202@default")
	}
	for _, m := range got {
		if m.Event() == "Hangup" && strings.HasPrefix(m.Get("Channel"), "PJSIP/201-") && m.Get("Cause") == "19" {
			t.Errorf("the caller hung up for no answer, want it answered by the voicemail")
		}
	}
	checkVoicemailConv(t, state, "201", "202")
}

// TestRingGroups: a group of RingGroups rings its members through their
// /n Local pairs as RingGroup does: Alice's call to 611 (member 203)
// is answered by Carol through Local/203@from-internal/n.
func TestRingGroups(t *testing.T) {
	p := startPBX(t, Config{Plan: PlanFreePBX, RingTimeout: 5 * time.Second, RingGroups: map[string][]string{"611": {"203"}}})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "611")
	if err != nil {
		t.Fatal(err)
	}
	got := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
	if n := count(got, "DialBegin", "DialString", "203@from-internal/n"); n != 1 {
		t.Errorf("%d DialBegin of Local/203@from-internal/n, want 1", n)
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
}
