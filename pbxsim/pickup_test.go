package pbxsim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestProofPickupRinging drives pickup_ringing: Alice calls Bob, who rings;
// Carol dials **202 and gets the call; Carol hangs up. The per-channel
// event sequences and the Cdrs are the recording's.
func TestProofPickupRinging(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answered := make(chan *PhoneCall, 1)
	go func() {
		c, err := alice.Call(ctx, "202")
		if err != nil {
			t.Error(err)
		}
		answered <- c
	}()
	capt.waitFor(t, "Bob ringing", func(m []ami.Message) bool { return count(m, "DialState") == 1 })
	cc, err := carol.Call(ctx, "**202")
	if err != nil {
		t.Fatal(err)
	}
	if a := <-answered; a == nil {
		t.Fatal("Alice's call was not answered by the pickup")
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	cc.Hangup(ctx)
	waitNoChannels(t, p)
	rec := readRecording(t, "pickup_ringing")
	got := capt.settle(t, rec)
	checkHeaders(t, rec, got)
	checkStates(t, "pickup_ringing", rec, got, []checkpoint{{"Pickup", 1}, {"HangupRequest", 1}})
	if w, g := endpointEvents(rec), endpointEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
	if w, g := cdrsOf(rec), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
}

// TestOriginatePickupChan is the REST pickup_conv: an Originate of Carol's
// phone to Application PickupChan with the ringing channel; Carol's phone
// answers and takes the call, Bob stops ringing.
func TestOriginatePickupChan(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answered := make(chan *PhoneCall, 1)
	go func() {
		c, _ := alice.Call(ctx, "202")
		answered <- c
	}()
	msgs := capt.waitFor(t, "Bob ringing", func(m []ami.Message) bool { return count(m, "DialState") == 1 })
	var bob string
	for _, m := range msgs {
		if m.Event() == "DialState" {
			bob = m.Get("DestChannel")
		}
	}
	res, err := capt.cli.Do(ctx, ami.NewAction("Originate", "Channel", "PJSIP/203", "Application", "PickupChan",
		"Data", bob, "CallerID", "203", "Timeout", "30000", "Async", "true"))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Originate: %v %v", res, err)
	}
	a := <-answered
	if a == nil {
		t.Fatal("Alice's call was not answered by the pickup")
	}
	msgs = capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if count(msgs, "Pickup", "TargetChannel", bob) != 1 || count(msgs, "Hangup", "Channel", bob, "Cause", "26") != 1 {
		t.Errorf("want Pickup of %s and its Hangup cause 26", bob)
	}
	a.Hangup(ctx)
	waitNoChannels(t, p)
}

// TestPickupQueueCall: a call ringing a queue member is picked up by
// another phone (Originate PickupChan on the member's ringing channel):
// the member's leg is cancelled, the caller leaves the queue and talks
// with the picker.
func TestPickupQueueCall(t *testing.T) {
	p := startPBX(t, Config{QueueMembers: []string{"203"}})
	startPhone(t, p, PhoneConfig{Exten: "203", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "205"})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678"})
	call, err := trunk.Call(ctx, "600")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "member ringing", func(m []ami.Message) bool { return count(m, "DialState") == 1 })
	var leg string
	for _, m := range msgs {
		if m.Event() == "DialState" {
			leg = m.Get("DestChannel")
		}
	}
	if _, err := capt.cli.Do(ctx, ami.NewAction("Originate", "Channel", "PJSIP/205", "Application", "PickupChan",
		"Data", leg, "Async", "true")); err != nil {
		t.Fatal(err)
	}
	msgs = capt.waitFor(t, "picked up", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if count(msgs, "Pickup", "TargetChannel", leg) != 1 || count(msgs, "Hangup", "Channel", leg, "Cause", "26") != 1 ||
		count(msgs, "QueueCallerLeave") != 1 || count(msgs, "BridgeEnter", "CallerIDNum", "205") != 1 {
		t.Error("want Pickup, the member's leg hung up (26), the caller out of the queue and bridged with 205")
	}
	call.Hangup(ctx)
	waitNoChannels(t, p)
}
