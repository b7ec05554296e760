package pbxsim

import (
	"regexp"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// recordedCall runs on the freepbx plan a call from 201 to number, with
// the AstDB's recording policy key set to "always" first (none when key
// is ""), answered, then hung up by the caller; it gives the stream and
// what calls.Engine showed while it was up.
func recordedCall(t *testing.T, key, number string) ([]ami.Message, fpView) {
	t.Helper()
	p := freepbxPBX(t)
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	if key != "" {
		if _, err := capt.cli.Do(ctx5(t), ami.NewAction("DBPut", "Family", "AMPUSER", "Key", key, "Val", "always")); err != nil {
			t.Fatal(err)
		}
	}
	call, err := alice.Call(ctx5(t), number)
	if err != nil {
		t.Fatal(err)
	}
	up := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	view := recView(up)
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	time.Sleep(50 * time.Millisecond)
	return capt.all(), view
}

// recView is, per extension, the recording of each conversation, as
// calls.Engine fed with msgs shows it.
func recView(msgs []ami.Message) fpView {
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
	eng.SetLink(calls.LinkLive)
	for _, m := range msgs {
		eng.Apply(m)
	}
	s := eng.Publish()
	out := fpView{}
	for _, x := range []string{"201", "203"} {
		out[x] = []string{""}
		for _, cv := range s.Extensions.Get(x).Conversations {
			out[x] = []string{cv.Recording}
		}
	}
	return out
}

var recFileRE = regexp.MustCompile(`^internal-203-201-\d{8}-\d{6}-\d+\.\d+\.wav$`)

// TestDialplanRecordingFreePBX: with AMPUSER/203/recording/in/internal
// at "always" (recording_dialplan's policy), FreePBX's sub-record-check
// starts MixMonitor on Alice's channel before 203 is dialled
// (MixMonitorStart, the channel block, context sub-record-check), the
// caller's Cdr names the file (RecordingFile internal-203-201-<time>-
// <uniqueid>.wav), the others' RecordingFile is empty; calls.Engine shows
// both parties' calls recorded. Without the policy nothing records.
func TestDialplanRecordingFreePBX(t *testing.T) {
	got, view := recordedCall(t, "203/recording/in/internal", "203")
	starts := 0
	for _, m := range got {
		if m.Event() == "MixMonitorStart" {
			starts++
			if m.Get("Context") != "sub-record-check" || m.Get("CallerIDNum") != "201" || m.Get("DestChannel") != "" {
				t.Errorf("MixMonitorStart %v: want Alice's channel in sub-record-check", m)
			}
		}
		if m.Event() == "Newchannel" && m.Get("CallerIDNum") == "203" && starts == 0 {
			t.Errorf("203 dialled before MixMonitor started")
		}
	}
	if starts != 1 {
		t.Errorf("%d MixMonitorStart, want 1", starts)
	}
	files := 0
	for _, m := range got {
		if m.Event() != "Cdr" {
			continue
		}
		f, ok := m.Lookup("RecordingFile")
		switch {
		case !ok:
			t.Errorf("Cdr of %s without RecordingFile", m.Get("Channel"))
		case f != "":
			files++
			if !recFileRE.MatchString(f) || m.Get("Source") != "201" {
				t.Errorf("Cdr of %s RecordingFile %q, want internal-203-201-<time>-<uniqueid>.wav on Alice's", m.Get("Channel"), f)
			}
		}
	}
	if files != 1 {
		t.Errorf("%d Cdrs name a recording file, want Alice's", files)
	}
	if view["201"][0] != "true" || view["203"][0] != "true" {
		t.Errorf("recording while up %v, want both true", view)
	}

	got, view = recordedCall(t, "", "203")
	if n := count(got, "MixMonitorStart"); n != 0 || view["201"][0] != "false" {
		t.Errorf("no policy: %d MixMonitorStart, recording %v; want none", n, view)
	}
}

// TestDialplanRecordingOutbound: with AMPUSER/201/recording/out/external
// at "always", the outbound route records Alice's call out: one
// MixMonitorStart on her channel, her Cdr's RecordingFile
// out-<number>-201-<time>-<uniqueid>.wav.
func TestDialplanRecordingOutbound(t *testing.T) {
	got, view := recordedCall(t, "201/recording/out/external", "0612345678")
	if n := count(got, "MixMonitorStart", "Context", "sub-record-check"); n != 1 {
		t.Errorf("%d MixMonitorStart, want 1", n)
	}
	re := regexp.MustCompile(`^out-0612345678-201-\d{8}-\d{6}-\d+\.\d+\.wav$`)
	files := 0
	for _, m := range got {
		if f := m.Get("RecordingFile"); m.Event() == "Cdr" && f != "" {
			files++
			if !re.MatchString(f) {
				t.Errorf("RecordingFile %q, want out-0612345678-201-<time>-<uniqueid>.wav", f)
			}
		}
	}
	if files != 1 || view["201"][0] != "true" {
		t.Errorf("%d Cdrs with a file, Alice's recording %v; want 1 and true", files, view["201"])
	}
}
