package pbxsim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// The actions behind DND, call forwarding and recording work against the
// simulator as they do against Asterisk: AstDB keeps values, a custom
// device state is reported as DeviceStateChange and listed, and MixMonitor
// on a live channel emits MixMonitorStart/Mute/Stop.
func TestFeatureActions(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	ctx := ctx5(t)
	do := func(a ami.Message) (ami.Response, error) { return capt.cli.Do(ctx, a) }

	if _, err := do(ami.NewAction("DBPut", "Family", "DND", "Key", "201", "Val", "YES")); err != nil {
		t.Fatal(err)
	}
	r, err := do(ami.NewAction("DBGet", "Family", "DND", "Key", "201"))
	if err != nil || len(r.Items) != 2 || r.Items[0].Get("Val") != "YES" {
		t.Fatalf("DBGet: %v %v", r.Items, err)
	}
	if _, err := do(ami.NewAction("DBDel", "Family", "DND", "Key", "201")); err != nil {
		t.Fatal(err)
	}
	var ae *ami.ActionError
	// Asterisk 22's answers (main/db.c): a missing key cannot be deleted,
	// is not found by DBGet, and a missing Family or Key is named.
	for _, c := range []struct {
		action ami.Message
		want   string
	}{
		{ami.NewAction("DBDel", "Family", "DND", "Key", "201"), "Database entry could not be deleted"},
		{ami.NewAction("DBGet", "Family", "DND", "Key", "201"), "Database entry not found"},
		{ami.NewAction("DBDel", "Key", "201"), "No family specified."},
		{ami.NewAction("DBDel", "Family", "DND"), "No key specified."},
		{ami.NewAction("DBGet", "Family", "DND"), "No key specified."},
		{ami.NewAction("DBPut", "Key", "201", "Val", "YES"), "No family specified"},
		{ami.NewAction("DBPut", "Family", "DND", "Val", "YES"), "No key specified"},
	} {
		if _, err := do(c.action); !errors.As(err, &ae) || ae.Message != c.want {
			t.Errorf("%s %s/%s: %v, want %q", c.action.Action(), c.action.Get("Family"), c.action.Get("Key"), err, c.want)
		}
	}

	if _, err := do(ami.NewAction("Setvar", "Variable", "DEVICE_STATE(Custom:DND201)", "Value", "BUSY")); err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "the custom device state", func(m []ami.Message) bool {
		return count(m, "DeviceStateChange", "Device", "Custom:DND201", "State", "BUSY") == 1
	})
	r, err = do(ami.NewAction("DeviceStateList"))
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, m := range r.Items {
		listed = listed || (m.Get("Device") == "Custom:DND201" && m.Get("State") == "BUSY")
	}
	if !listed {
		t.Error("DeviceStateList does not list Custom:DND201")
	}

	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 50 * time.Millisecond})
	call, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	ch := p.Channels()[0]
	for _, a := range []ami.Message{
		ami.NewAction("MixMonitor", "Channel", ch, "File", "x.wav"),
		ami.NewAction("MixMonitorMute", "Channel", ch, "Direction", "both", "State", "1"),
		ami.NewAction("StopMixMonitor", "Channel", ch),
	} {
		if _, err := do(a); err != nil {
			t.Fatalf("%s: %v", a.Action(), err)
		}
	}
	capt.waitFor(t, "recording events", func(m []ami.Message) bool {
		return count(m, "MixMonitorStart", "Channel", ch) == 1 && count(m, "MixMonitorMute", "Channel", ch, "State", "1") == 1 &&
			count(m, "MixMonitorStop", "Channel", ch) == 1
	})
	if _, err := do(ami.NewAction("MixMonitor", "Channel", "PJSIP/999-00000001")); !errors.As(err, &ae) {
		t.Errorf("MixMonitor on no channel: %v", err)
	}
	call.Hangup(ctx)
	waitNoChannels(t, p)
}

// QueuePause takes a member out of the queue's rotation and says so.
func TestQueuePause(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	ctx := ctx5(t)
	if _, err := capt.cli.Do(ctx, ami.NewAction("QueuePause", "Interface", "PJSIP/203", "Queue", DefaultQueue, "Paused", "true", "Reason", "lunch")); err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "QueueMemberPause", func(m []ami.Message) bool {
		return count(m, "QueueMemberPause", "Interface", "PJSIP/203", "Paused", "1", "PausedReason", "lunch") == 1
	})
	r, err := capt.cli.Do(ctx, ami.NewAction("QueueStatus"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range r.Items {
		if m.Event() == "QueueMember" && m.Get("Location") == "PJSIP/203" {
			found = m.Get("Paused") == "1" && m.Get("PausedReason") == "lunch"
		}
	}
	if !found {
		t.Error("QueueStatus does not show 203 paused")
	}
	var ae *ami.ActionError
	if _, err := capt.cli.Do(ctx, ami.NewAction("QueuePause", "Interface", "PJSIP/299", "Paused", "true")); !errors.As(err, &ae) {
		t.Errorf("pausing a non-member: %v", err)
	}
}

// TestDBGetTree: the family's keys as full paths, in key order; CFB is not
// part of CF; an empty tree is an empty list; every key with no family.
func TestDBGetTree(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	ctx := ctx5(t)
	do := func(a ami.Message) (ami.Response, error) { return capt.cli.Do(ctx, a) }
	for _, kv := range [][3]string{{"CF", "202", "0721405516"}, {"CF", "201", "202"}, {"CFB", "201", "203"}} {
		if _, err := do(ami.NewAction("DBPut", "Family", kv[0], "Key", kv[1], "Val", kv[2])); err != nil {
			t.Fatal(err)
		}
	}
	tree := func(hs ...string) []string {
		r, err := do(ami.NewAction("DBGetTree", hs...))
		if err != nil {
			t.Fatalf("DBGetTree %v: %v", hs, err)
		}
		var out []string
		for _, m := range r.Items {
			if m.Event() == "DBGetTreeResponse" {
				out = append(out, m.Get("Key")+"="+m.Get("Val"))
			}
		}
		return out
	}
	if got := tree("Family", "CF"); !slices.Equal(got, []string{"/CF/201=202", "/CF/202=0721405516"}) {
		t.Errorf("CF: %v", got)
	}
	if got := tree("Family", "CF", "Key", "201"); !slices.Equal(got, []string{"/CF/201=202"}) {
		t.Errorf("CF/201: %v", got)
	}
	if got := tree("Family", "DND"); len(got) != 0 {
		t.Errorf("DND: %v", got)
	}
	if got := tree(); len(got) != 3 {
		t.Errorf("all: %v", got)
	}
}
