package pbxsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// atxferRinging: Alice (201) calls Bob (202), who answers; the AMI Atxfer
// on Alice's channel consults Carol (203, with carol's config), and the
// capture (started after the phones registered) waits until Carol's phone
// rings. It returns Alice's call and the capture.
func atxferRinging(t *testing.T, p *PBX, carol PhoneConfig) (*PhoneCall, *capture) {
	t.Helper()
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	startPhone(t, p, carol)
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
	if _, err := capt.cli.Do(ctx, ami.NewAction("Atxfer", "Channel", own, "Exten", "203", "Context", "from-internal")); err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "Carol ringing", func(m []ami.Message) bool {
		return count(m, "DialState", "DestCallerIDNum", "203", "DialStatus", "RINGING") > 0
	})
	return ab, capt
}

// firstIndex is the index of the first event ev with the headers kv, -1
// when none.
func firstIndex(msgs []ami.Message, ev string, kv ...string) int {
	for i, m := range msgs {
		if count([]ami.Message{m}, ev, kv...) == 1 {
			return i
		}
	}
	return -1
}

// TestProofAtxferBlond: Alice hangs up while Carol, the target, still
// rings: a blonde transfer as Asterisk 22 runs it (bridge_basic.c: from
// "Calling Target", the transferer's hangup takes the held bridge off
// hold, merges the consult bridge into it and reports the transfer done).
// Bob is not hung up: AttendedTransfer Success comes before Carol answers,
// Bob waits for her bridged with the ringing Local half, and talks with
// her once she answers (the Local pair optimises away). Every event has a
// shape the recordings have (headers in order, fixed values), and the
// engine fed this stream shows Bob waiting for Carol, then talking with
// her.
func TestProofAtxferBlond(t *testing.T) {
	p := startPBX(t, Config{})
	ab, capt := atxferRinging(t, p, PhoneConfig{Exten: "203", RingTime: 700 * time.Millisecond})
	ab.Hangup(ctx5(t))
	msgs := capt.waitFor(t, "Bob with Carol", func(m []ami.Message) bool { return count(m, "LocalOptimizationEnd") == 1 })
	xfer := firstIndex(msgs, "AttendedTransfer", "Result", "Success", "TransfereeCallerIDNum", "202")
	answer := firstIndex(msgs, "Newstate", "CallerIDNum", "203", "ChannelState", "6")
	bobGone := -1
	for i, m := range msgs {
		if m.Event() == "Hangup" && strings.HasPrefix(m.Get("Channel"), "PJSIP/202-") {
			bobGone = i
		}
	}
	if xfer < 0 || answer < 0 || xfer > answer || bobGone >= 0 {
		t.Fatalf("AttendedTransfer at #%d, Carol's answer at #%d, Bob's Hangup at #%d: want the transfer before the answer, Bob up", xfer, answer, bobGone)
	}
	if i := firstIndex(msgs, "BridgeMerge"); i < 0 || i > xfer {
		t.Errorf("BridgeMerge at #%d, want before the AttendedTransfer (#%d)", i, xfer)
	}
	checkHeaders(t, readRecording(t, "atxfer_complete"), msgs)
	checkShapes(t, msgs)

	// What the engine shows: right after the transfer, Bob (the
	// transferee) waits for Carol; after her answer he talks with her.
	at := func(n int) calls.Conversation {
		e := calls.New(calls.Config{Names: defaultNames})
		e.SetLink(calls.LinkLive)
		for _, m := range msgs[:n] {
			e.Apply(m)
		}
		cs := e.Publish().Extensions.Get("202").Conversations
		if len(cs) != 1 {
			t.Fatalf("#%d: Bob has %d calls", n, len(cs))
		}
		for _, cv := range cs {
			return cv
		}
		return calls.Conversation{}
	}
	if cv := at(xfer + 1); cv.CounterpartNum != "203" || cv.Connected || cv.Extras().Transfer.Role != "transferee" {
		t.Errorf("Bob after the blonde transfer: %+v %+v; want waiting for 203", cv, cv.Extras())
	}
	if cv := at(len(msgs)); cv.CounterpartNum != "203" || !cv.Connected {
		t.Errorf("Bob after Carol's answer: %+v; want talking with 203", cv)
	}
}

// TestRESTAtxferCancelWhileRinging: through the bridge's REST API, Alice
// (201) consults Carol (203), whose phone rings; atxfer_cancel hangs up
// the consult's Local leg and pbxsim does what Asterisk does when the
// target hangs up in "Calling Target": Alice is back with Bob, off hold,
// and Carol's phone stops ringing (a cancelled dial, not a no answer);
// every event in a recorded shape.
func TestRESTAtxferCancelWhileRinging(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "203", NoAnswer: true})
	b := startBridge(t, p)
	ab, err := alice.Call(ctx5(t), "202")
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Hangup(ctx5(t))
	b.waitState("201 talking with 202", func(e map[string]panelExt) bool { return talking(e, "201", "202") })
	exts, _ := b.state()
	b.post("atxfer", `{"convid":"`+convOf(exts, "201")+`","endpointId":"201","to":"203"}`)
	b.waitState("203 ringing", func(e map[string]panelExt) bool { return e["203"].Status == "ringing" })
	exts, _ = b.state()
	b.post("atxfer_cancel", `{"convid":"`+convOf(exts, "201")+`","endpointId":"201"}`)
	b.waitState("201 back with 202, 203 idle", func(e map[string]panelExt) bool {
		return talking(e, "201", "202") && talking(e, "202", "201") && idle(e, "203") && len(e["201"].Conversations) == 1
	})
	msgs := b.capt.waitFor(t, "Bob off hold", func(m []ami.Message) bool {
		return count(m, "MusicOnHoldStop", "CallerIDNum", "202") == 1
	})
	if count(msgs, "AttendedTransfer") != 0 {
		t.Error("want no transfer")
	}
	if count(msgs, "DialEnd", "DestCallerIDNum", "203", "DialStatus", "CANCEL") != 1 {
		t.Error("want Carol's dial cancelled")
	}
	checkHeaders(t, readRecording(t, "atxfer_complete"), msgs)
	checkShapes(t, msgs)
}

// TestAtxferBlondNoAnswer: a blonde transfer whose target never answers
// ends with the transferee hung up and no channel left (pbxsim does not
// call the transferer back as Asterisk's atxfercallbackretries would).
func TestAtxferBlondNoAnswer(t *testing.T) {
	p := startPBX(t, Config{RingTimeout: time.Second})
	ab, capt := atxferRinging(t, p, PhoneConfig{Exten: "203", NoAnswer: true})
	ab.Hangup(ctx5(t))
	waitNoChannels(t, p)
	// The capture may lag behind the PBX: wait for the events.
	capt.waitFor(t, "the transfer reported and Carol's dial cancelled", func(m []ami.Message) bool {
		return count(m, "AttendedTransfer", "Result", "Success") == 1 &&
			count(m, "DialEnd", "DestCallerIDNum", "203", "DialStatus", "CANCEL") == 1
	})
}
