package pbxsim

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// dialled sums up the calls of a stream: per Dial, caller endpoint ->
// DialString, and the Cdrs.
func dialled(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Event() == "DialBegin" {
			out = append(out, m.Get("CallerIDNum")+" dials "+m.Get("DestExten")+" on PJSIP/"+m.Get("DialString"))
		}
	}
	return append(out, cdrsOf(msgs)...)
}

// TestProofCallForwardAstDB drives call_forward_astdb: with CF/201=202 in
// AstDB Carol's call to 201 rings Bob (201 never rings); without it, Alice.
// Then DND/204: a call to 204 gets Busy.
func TestProofCallForwardAstDB(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	startPhone(t, p, PhoneConfig{Exten: "201", RingTime: 100 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	startPhone(t, p, PhoneConfig{Exten: "204"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do := func(kv ...string) {
		t.Helper()
		if _, err := capt.cli.Do(ctx, ami.NewAction(kv[0], kv[1:]...)); err != nil {
			t.Fatalf("%s: %v", kv[0], err)
		}
	}
	call := func() {
		t.Helper()
		c, err := carol.Call(ctx, "201")
		if err != nil {
			t.Fatal(err)
		}
		c.Hangup(ctx)
		waitNoChannels(t, p)
	}
	do("DBPut", "Family", "CF", "Key", "201", "Val", "202")
	call()
	do("DBDel", "Family", "CF", "Key", "201")
	call()
	do("DBPut", "Family", "DND", "Key", "204", "Val", "YES")
	do("Setvar", "Variable", "DEVICE_STATE(Custom:DND204)", "Value", "BUSY")
	rec := readRecording(t, "call_forward_astdb")
	got := capt.waitFor(t, "both Cdrs and the DND device", func(m []ami.Message) bool {
		return count(m, "Cdr") == 2 && count(m, "DeviceStateChange", "Device", "Custom:DND204") == 1
	})
	checkHeaders(t, rec, got)
	checkStates(t, "call_forward_astdb", rec, got, []checkpoint{{"BridgeEnter", 2}, {"BridgeEnter", 4}})
	if w, g := dialled(rec), dialled(got); !reflect.DeepEqual(w, g) {
		t.Errorf("calls differ:\nrecording: %q\npbxsim:    %q", w, g)
	}

	// DND (not called in the recording): Busy, 204 never rings.
	if _, err := carol.Call(ctx, "204"); !errors.Is(err, ErrCallFailed) {
		t.Errorf("call to 204 in DND: %v, want refused busy", err)
	}
	waitNoChannels(t, p)
	msgs := capt.waitFor(t, "busy hangup", func(m []ami.Message) bool { return count(m, "Hangup", "CallerIDNum", "203", "Cause", "17") == 1 })
	if count(msgs, "Newchannel", "CallerIDNum", "204") != 0 {
		t.Errorf("DND: 204 must not ring and Carol's call must end busy")
	}
}

// TestForwardBusyUnavailable: CFB forwards a call refused busy, CFU one
// to an extension without contact.
func TestForwardBusyUnavailable(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201", Busy: true})
	startPhone(t, p, PhoneConfig{Exten: "202"})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, kv := range [][]string{{"CFB", "201", "202"}, {"CFU", "205", "202"}} {
		if _, err := capt.cli.Do(ctx, ami.NewAction("DBPut", "Family", kv[0], "Key", kv[1], "Val", kv[2])); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []string{"201", "205"} {
		c, err := carol.Call(ctx, to)
		if err != nil {
			t.Fatalf("call to %s: %v", to, err)
		}
		c.Hangup(ctx)
		waitNoChannels(t, p)
	}
	// Bob answers both: the busy 201's and the unavailable 205's.
	capt.waitFor(t, "two forwarded calls answered by Bob", func(m []ami.Message) bool { return count(m, "BridgeEnter", "CallerIDNum", "202") == 2 })
}
