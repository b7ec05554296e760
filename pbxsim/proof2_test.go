package pbxsim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestProofParkRetrieve drives park_retrieve: Alice calls Bob; AMI Park
// parks Alice (Bob is released); Carol dials 701 and talks with Alice;
// Carol hangs up. Per-endpoint event sequences and Cdrs as the recording.
func TestProofParkRetrieve(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ab, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	var own, bob string
	for _, m := range msgs {
		if m.Event() == "Newchannel" {
			switch m.Get("CallerIDNum") {
			case "201":
				own = m.Get("Channel")
			case "202":
				bob = m.Get("Channel")
			}
		}
	}
	if _, err := capt.cli.Do(ctx, ami.NewAction("Park", "Channel", own, "TimeoutChannel", bob)); err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "parked", func(m []ami.Message) bool { return count(m, "ParkedCall") == 1 })
	cc, err := carol.Call(ctx, "701")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "retrieved", func(m []ami.Message) bool { return count(m, "UnParkedCall") == 1 })
	cc.Hangup(ctx)
	<-ab.Done()
	waitNoChannels(t, p)
	rec := readRecording(t, "park_retrieve")
	got := capt.settle(t, rec)
	checkHeaders(t, rec, got)
	checkStates(t, "park_retrieve", rec, got, []checkpoint{{"ParkedCall", 1}, {"UnParkedCall", 1}, {"HangupRequest", 1}})
	if w, g := endpointEvents(rec), endpointEvents(got); !reflect.DeepEqual(w, g) {
		for k := range w {
			if !reflect.DeepEqual(w[k], g[k]) {
				t.Errorf("events of %s differ:\nrecording: %v\npbxsim:    %v", k, w[k], g[k])
			}
		}
	}
	if w, g := cdrsOf(rec), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
}

// TestProofInboundTrunkDID drives inbound_trunk_did: an external caller
// on the trunk calls DID 202, Bob answers, the caller hangs up.
func TestProofInboundTrunkDID(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
	call, err := trunk.Call(ctx5(t), "202")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	rec := readRecording(t, "inbound_trunk_did")
	got := capt.settle(t, rec)
	checkHeaders(t, rec, got)
	if w, g := channelEvents(rec), channelEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
	if w, g := cdrsOf(rec), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
}

// TestProofStatusActionsDuringCall drives status_actions_during_call: a
// trunk caller waits in the queue while both agents ring, Alice talks
// with Bob; the status actions run; the caller abandons, Alice hangs up.
func TestProofStatusActionsDuringCall(t *testing.T) {
	proof(t, "status_actions_during_call", []checkpoint{{"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0655501234", Name: "Anna Bianchi"})
		q, err := trunk.Call(ctx5(t), "600")
		if err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "agents ringing", func(m []ami.Message) bool { return count(m, "AgentCalled") == 2 })
		ab, err := ph["201"].Call(ctx5(t), "202")
		if err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		for _, a := range []string{"CoreShowChannels", "ExtensionStateList", "DeviceStateList", "PJSIPShowEndpoints",
			"PJSIPShowContacts", "QueueStatus", "QueueSummary", "ParkedCalls", "Parkinglots", "CoreStatus"} {
			if _, err := capt.cli.Do(ctx5(t), ami.NewAction(a)); err != nil {
				t.Errorf("%s: %v", a, err)
			}
		}
		q.Hangup(ctx5(t)) // the caller abandons
		capt.waitFor(t, "abandon", func(m []ami.Message) bool { return count(m, "QueueCallerAbandon") == 1 })
		ab.Hangup(ctx5(t))
	})
}
