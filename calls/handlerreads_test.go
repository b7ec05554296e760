package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// The handlers that read several headers of an event in one pass (an
// ami.KeySet) read each from its own header, in any case of its key.

func evMsg(kv ...string) ami.Message {
	var hs []ami.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

func TestBridgeKinds(t *testing.T) {
	for _, tc := range []struct {
		kv            []string
		holding, conf bool
	}{
		{[]string{"BridgeType", "basic", "BridgeTechnology", "simple_bridge"}, false, false},
		{[]string{"BridgeType", "holding", "BridgeTechnology", "holding_bridge"}, true, false},
		{[]string{"BridgeType", "parking", "BridgeTechnology", "simple_bridge"}, true, false},
		{[]string{"BridgeTechnology", "softmix", "BridgeType", "basic"}, false, true},
		{[]string{"bridgetechnology", "softmix"}, false, true},
		{[]string{"BRIDGETYPE", "parking"}, true, false},
		{[]string{"BridgeTechnology", "parking", "BridgeType", "softmix"}, false, false},
	} {
		for _, ev := range []string{ami.EventBridgeCreate, ami.EventBridgeEnter} {
			e := New(Config{})
			e.Apply(evMsg(append([]string{"Event", ev, "BridgeUniqueid", "b1"}, tc.kv...)...))
			if ev == ami.EventBridgeEnter {
				// A bridge first heard of by a channel entering it.
				e.Apply(evMsg("Event", ami.EventNewchannel, "Channel", "PJSIP/201-1", "Uniqueid", "u1", "ChannelState", "6"))
				e.Apply(evMsg(append([]string{"Event", ev, "Channel", "PJSIP/201-1", "Uniqueid", "u1", "BridgeUniqueid", "b1"}, tc.kv...)...))
			}
			b := e.bridges["b1"]
			if b == nil || b.holding != tc.holding || b.conf != tc.conf {
				t.Errorf("%s %q: bridge %+v, want holding %v, conf %v", ev, tc.kv, b, tc.holding, tc.conf)
			}
		}
	}
}

func TestExtensionStatusReads(t *testing.T) {
	e := New(Config{})
	e.Apply(evMsg("Event", ami.EventExtensionStatus, "Exten", "201", "Context", "from-internal", "Hint", "PJSIP/201",
		"Status", "x", "StatusText", "Ringing"))
	x := e.exts["201"]
	if x == nil || x.status != "ringing" || x.context != "from-internal" {
		t.Fatalf("extension %+v, want ringing in from-internal (StatusText of a bad Status)", x)
	}
	e.Apply(evMsg("Event", ami.EventExtensionStatus, "exten", "201", "status", "1", "Context", "other", "StatusText", "Idle"))
	if x.status != "busy" || x.context != "from-internal" {
		t.Errorf("extension %+v, want busy (Status before StatusText), first context kept", x)
	}
	e.Apply(evMsg("Event", ami.EventExtensionStatus, "Exten", "202", "STATUSTEXT", "InUse", "CONTEXT", "ctx2"))
	if x := e.exts["202"]; x == nil || x.status != "busy" || x.context != "ctx2" {
		t.Errorf("extension 202 %+v, want busy in ctx2", x)
	}
}
