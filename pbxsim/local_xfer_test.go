package pbxsim

import (
	"reflect"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// atxferLocal runs, on the ring group call of ringgroup_local (Alice 201
// with Carol 203 through Local/203@from-internal/n), an Atxfer by the
// transferer (PJSIP/201 or PJSIP/203) to 205, who answers; then the
// transferer hangs up (AMI Hangup), completing the transfer. It gives
// the stream once the target is bridged, the PBX and the channel names.
func atxferLocal(t *testing.T, transferer string) ([]ami.Message, *PBX, *capture, map[string]string) {
	t.Helper()
	p, capt, _, ch := ringGroupTalking(t)
	startPhone(t, p, PhoneConfig{Exten: "205", RingTime: 100 * time.Millisecond})
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Atxfer", "Channel", ch[transferer], "Exten", "205"))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Atxfer: %v %v", res.Message, err)
	}
	capt.waitFor(t, "the target answered", func(m []ami.Message) bool { return count(m, "DialEnd", "DialStatus", "ANSWER") == 4 })
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Hangup", "Channel", ch[transferer], "Cause", "16")); err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "the transfer", func(m []ami.Message) bool { return count(m, "LocalOptimizationEnd") == 1 })
	if n := count(msgs, "AttendedTransfer", "Result", "Success"); n != 1 {
		t.Errorf("%d AttendedTransfer Success, want 1", n)
	}
	return msgs, p, capt, ch
}

// TestAtxferLocalCaller: Alice transfers Carol, who answered her ring
// group call through a /n Local pair, to 205. The transferee is ;1 (her
// bridge peer); completed, 205 takes Alice's place beside ;1 and talks
// with Carol through the pair, which stays. Carol's hangup ends it all.
func TestAtxferLocalCaller(t *testing.T) {
	msgs, p, capt, ch := atxferLocal(t, "PJSIP/201")
	if n := count(msgs, "AttendedTransfer", "TransfereeChannel", ch["Local;1"]); n != 1 {
		t.Errorf("no AttendedTransfer with ;1 (%s) as transferee", ch["Local;1"])
	}
	want := fpView{"201": nil, "203": {"in:205:true"}, "205": {"in:203:true"}}
	if v := engineView(t, msgs, nil, []string{"201", "203", "205"}); !reflect.DeepEqual(v, want) {
		t.Errorf("after the transfer %v, want %v", v, want)
	}
	if got := len(p.Channels()); got != 4 {
		t.Errorf("channels after the transfer %v, want 4 (205, the pair, 203)", p.Channels())
	}
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Hangup", "Channel", ch["PJSIP/203"], "Cause", "16")); err != nil {
		t.Fatal(err)
	}
	waitNoChannels(t, p)
}

// TestAtxferLocalPhone: Carol transfers Alice to 205: the transferee is
// ;2; completed, 205 talks with Alice through the pair.
func TestAtxferLocalPhone(t *testing.T) {
	msgs, p, capt, ch := atxferLocal(t, "PJSIP/203")
	if n := count(msgs, "AttendedTransfer", "TransfereeChannel", ch["Local;2"]); n != 1 {
		t.Errorf("no AttendedTransfer with ;2 (%s) as transferee", ch["Local;2"])
	}
	want := fpView{"201": {"out:205:true"}, "203": nil, "205": {"in:201:true"}}
	if v := engineView(t, msgs, nil, []string{"201", "203", "205"}); !reflect.DeepEqual(v, want) {
		t.Errorf("after the transfer %v, want %v", v, want)
	}
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Hangup", "Channel", ch["PJSIP/201"], "Cause", "16")); err != nil {
		t.Fatal(err)
	}
	waitNoChannels(t, p)
}

// TestAtxferLocalBusy: the target refuses: Alice is back with Carol
// through the pair, off hold, and the call goes on.
func TestAtxferLocalBusy(t *testing.T) {
	p, capt, _, ch := ringGroupTalking(t)
	startPhone(t, p, PhoneConfig{Exten: "205", Busy: true})
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Atxfer", "Channel", ch["PJSIP/201"], "Exten", "205")); err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "back", func(m []ami.Message) bool { return count(m, "Unhold") == 1 })
	if n := count(msgs, "MusicOnHoldStop", "Channel", ch["Local;1"]); n != 1 {
		t.Errorf("%d MusicOnHoldStop on ;1, want 1", n)
	}
	want := fpView{"201": {"out:203:true"}, "203": {"in:201:true"}}
	if v := engineView(t, msgs, nil, []string{"201", "203"}); !reflect.DeepEqual(v, want) {
		t.Errorf("after the refusal %v, want %v", v, want)
	}
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Hangup", "Channel", ch["PJSIP/203"], "Cause", "16")); err != nil {
		t.Fatal(err)
	}
	waitNoChannels(t, p)
}
