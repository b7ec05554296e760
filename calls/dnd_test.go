package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

func event(name string, kv ...string) ami.Message {
	hs := []ami.Header{{Key: "Event", Value: name}}
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

// FreePBX's do-not-disturb is the custom device state Custom:DND<ext>:
// while it is on, an idle extension shows "dnd" (and dnd true); a call
// still shows as busy; turning it off brings "online" back.
func TestDNDFromCustomDeviceState(t *testing.T) {
	e := New(Config{})
	e.SetLink(LinkLive)
	check := func(what, status string, dnd bool) {
		t.Helper()
		x, ok := e.Publish().Extensions.Lookup("201")
		if !ok || x.Status != status || x.DND != dnd {
			t.Errorf("%s: 201 = %q dnd %v, want %q dnd %v", what, x.Status, x.DND, status, dnd)
		}
	}
	e.Apply(event("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", "0", "StatusText", "Idle"))
	check("idle", "online", false)
	e.Apply(event("DeviceStateChange", "Device", "Custom:DND201", "State", "BUSY"))
	check("dnd on", "dnd", true)
	e.Apply(event("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", "1", "StatusText", "InUse"))
	check("in a call with dnd on", "busy", true)
	e.Apply(event("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", "0", "StatusText", "Idle"))
	e.Apply(event("DeviceStateChange", "Device", "custom:dnd201", "State", "NOT_INUSE"))
	check("dnd off", "online", false)
	// A DeviceStateList item during a resync carries the same state.
	e.Apply(event("DeviceStateChange", "ActionID", "x-5", "Device", "Custom:DND201", "State", "BUSY"))
	check("listed at resync", "dnd", true)
	// Not an extension: ignored, never a panic.
	e.Apply(event("DeviceStateChange", "Device", "Custom:DND", "State", "BUSY"))
	e.Apply(event("DeviceStateChange", "Device", "Custom:DNDtrunk-x", "State", "BUSY"))
	e.Publish()
}
