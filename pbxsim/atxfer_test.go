package pbxsim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// atxferScenario: Alice calls Bob; the AMI Atxfer on the transferer's
// channel (201: Alice, 202: Bob) consults Carol, who answers; the
// transferer hangs up, completing the transfer; then the remaining pair
// hangs up (Carol when Alice transferred, Alice when Bob did).
func atxferScenario(t *testing.T, transferer, rec string) []ami.Message {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	bob := startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	carol := startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 200 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ab, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	ba := <-bob.Answered()
	msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	var own string
	for _, m := range msgs {
		if m.Event() == "Newchannel" && m.Get("CallerIDNum") == transferer {
			own = m.Get("Channel")
		}
	}
	res, err := capt.cli.Do(ctx, ami.NewAction("Atxfer", "Channel", own, "Exten", "203", "Context", "from-internal"))
	if err != nil || res.Get("Message") != "Atxfer successfully queued" {
		t.Fatalf("Atxfer: %v %v", res, err)
	}
	var cb *PhoneCall
	select {
	case cb = <-carol.Answered():
	case <-time.After(5 * time.Second):
		t.Fatal("Carol was not called")
	}
	capt.waitFor(t, "consulting", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 6 })
	if transferer == "201" {
		ab.Hangup(ctx)
		capt.waitFor(t, "transferred", func(m []ami.Message) bool { return count(m, "LocalOptimizationEnd") == 1 })
		cb.Hangup(ctx)
	} else {
		ba.Hangup(ctx)
		capt.waitFor(t, "transferred", func(m []ami.Message) bool { return count(m, "LocalOptimizationEnd") == 1 })
		ab.Hangup(ctx)
	}
	waitNoChannels(t, p)
	return capt.settle(t, readRecording(t, rec))
}

func checkAtxfer(t *testing.T, rec string, got []ami.Message) {
	t.Helper()
	want := readRecording(t, rec)
	checkHeaders(t, want, got)
	checkStates(t, rec, want, got, []checkpoint{{"DTMFEnd", 1}, {"BridgeMerge", 1}, {"LocalOptimizationEnd", 1}})
	if w, g := endpointEvents(want), endpointEvents(got); !reflect.DeepEqual(w, g) {
		for k := range w {
			if !reflect.DeepEqual(w[k], g[k]) {
				t.Errorf("%s: events of %s differ:\nrecording: %v\npbxsim:    %v", rec, k, w[k], g[k])
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				t.Errorf("%s: pbxsim has events of %s the recording has not: %v", rec, k, g[k])
			}
		}
	}
	if w, g := cdrsOf(want), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: Cdrs differ:\nrecording: %q\npbxsim:    %q", rec, w, g)
	}
	if count(got, "AttendedTransfer", "Result", "Success") != 1 {
		t.Errorf("%s: no AttendedTransfer Success", rec)
	}
}

// TestProofAtxferComplete: the caller (Alice) transfers Bob to Carol.
func TestProofAtxferComplete(t *testing.T) {
	checkAtxfer(t, "atxfer_complete", atxferScenario(t, "201", "atxfer_complete"))
}

// TestProofAttendedTransferAtxfer: the callee (Bob) transfers Alice to Carol.
func TestProofAttendedTransferAtxfer(t *testing.T) {
	checkAtxfer(t, "attended_transfer_atxfer", atxferScenario(t, "202", "attended_transfer_atxfer"))
}

// TestAtxferTargetBusy: the target refuses; the transferer is back with
// the transferee, off hold, and the call goes on.
func TestAtxferTargetBusy(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202"})
	startPhone(t, p, PhoneConfig{Exten: "203", Busy: true})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ab, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	var own string
	for _, m := range msgs {
		if m.Event() == "Newchannel" && m.Get("CallerIDNum") == "201" {
			own = m.Get("Channel")
		}
	}
	if _, err := capt.cli.Do(ctx, ami.NewAction("Atxfer", "Channel", own, "Exten", "203")); err != nil {
		t.Fatal(err)
	}
	// Unhold and Bob's MusicOnHoldStop are two events: the capture may
	// hold the first without the second yet (seen once in CI).
	msgs = capt.waitFor(t, "Alice back and Bob off hold", func(m []ami.Message) bool {
		return count(m, "Unhold") == 1 && count(m, "MusicOnHoldStop", "CallerIDNum", "202") == 1
	})
	if count(msgs, "AttendedTransfer") != 0 {
		t.Error("want no AttendedTransfer")
	}
	time.Sleep(100 * time.Millisecond)
	if ch := p.Channels(); len(ch) != 2 {
		t.Fatalf("channels %v, want Alice's and Bob's", ch)
	}
	ab.Hangup(ctx)
	waitNoChannels(t, p)
}
