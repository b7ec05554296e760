package amievent_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// recorded is the first event named name in a recording of Asterisk 22.
func recorded(t *testing.T, file, name string) ami.Message {
	t.Helper()
	for _, m := range amitest.ReadRecording(t, "../testdata/"+file) {
		if m.Event() == name {
			return m
		}
	}
	t.Fatalf("%s: no %s", file, name)
	return ami.Message{}
}

// channel is the channel block of m prefixed p, as a Channel.
func channel(t *testing.T, m ami.Message, p string) *amievent.Channel {
	t.Helper()
	atoi := func(k string) int {
		n, err := strconv.Atoi(m.Get(p + k))
		if err != nil {
			t.Fatalf("%s%s: %v", p, k, err)
		}
		return n
	}
	// A "<unknown>" recorded is an empty field here, written back as
	// "<unknown>".
	get := func(k string) string {
		if v := m.Get(p + k); v != "<unknown>" {
			return v
		}
		return ""
	}
	return &amievent.Channel{Name: m.Get(p + "Channel"), State: atoi("ChannelState"), Num: get("CallerIDNum"), CIDName: get("CallerIDName"),
		Conn: get("ConnectedLineNum"), ConnName: get("ConnectedLineName"), Account: m.Get(p + "AccountCode"),
		Context: m.Get(p + "Context"), Exten: m.Get(p + "Exten"), Priority: atoi("Priority"), UID: m.Get(p + "Uniqueid"), Linked: m.Get(p + "Linkedid")}
}

func bridge(t *testing.T, m ami.Message, p string) *amievent.Bridge {
	t.Helper()
	n, err := strconv.Atoi(m.Get(p + "BridgeNumChannels"))
	if err != nil {
		t.Fatal(err)
	}
	return &amievent.Bridge{ID: m.Get(p + "BridgeUniqueid"), Type: m.Get(p + "BridgeType"), Tech: m.Get(p + "BridgeTechnology"), Channels: n}
}

func same(t *testing.T, what string, got, want ami.Message) {
	t.Helper()
	if !slices.Equal(got.Headers(), want.Headers()) {
		t.Errorf("%s built:\n%s\nrecorded:\n%s", what, got, want)
	}
}

// Each builder writes the recorded event again, header for header, from
// the snapshot's values: a trunk call's DialBegin (a channel and its
// Dest), the callee's Hangup (a channel event with pairs), BridgeEnter
// and BridgeDestroy, and an attended transfer's BridgeMerge (two
// prefixed bridges) and its Local pair's event with an empty caller ID.
func TestBuildersWriteTheRecordedEvents(t *testing.T) {
	const trunk = "inbound_trunk_did.ami"
	m := recorded(t, trunk, ami.EventDialBegin)
	same(t, "DialBegin", amievent.DialEvent(ami.EventDialBegin, channel(t, m, ""), channel(t, m, "Dest"), "DialString", m.Get("DialString")), m)
	m = recorded(t, trunk, ami.EventHangup)
	same(t, "Hangup", amievent.ChannelEvent(ami.EventHangup, channel(t, m, ""), "Cause", m.Get("Cause"), "Cause-txt", m.Get("Cause-txt")), m)
	m = recorded(t, trunk, ami.EventBridgeEnter)
	same(t, "BridgeEnter", amievent.BridgeEvent(ami.EventBridgeEnter, bridge(t, m, ""), channel(t, m, "")), m)
	m = recorded(t, trunk, ami.EventBridgeDestroy)
	same(t, "BridgeDestroy", amievent.BridgeEvent(ami.EventBridgeDestroy, bridge(t, m, ""), nil), m)

	m = recorded(t, "attended_transfer_atxfer.ami", ami.EventBridgeMerge)
	hs := amievent.AppendBridge(amievent.Head(ami.EventBridgeMerge, "call,all", 16), "To", bridge(t, m, "To"))
	same(t, "BridgeMerge", ami.NewMessage(amievent.AppendBridge(hs, "From", bridge(t, m, "From"))...), m)
	m = recorded(t, "attended_transfer_atxfer.ami", ami.EventLocalBridge)
	hs = amievent.AppendChannel(amievent.Head(ami.EventLocalBridge, "call,all", 32), "LocalOne", channel(t, m, "LocalOne"))
	hs = amievent.AppendChannel(hs, "LocalTwo", channel(t, m, "LocalTwo"))
	same(t, "LocalBridge", ami.NewMessage(amievent.AppendPairs(hs, "Context", m.Get("Context"), "Exten", m.Get("Exten"), "LocalOptimization", m.Get("LocalOptimization"))...), m)
}

func TestStateDesc(t *testing.T) {
	for s, want := range map[int]string{0: "Down", 4: "Ring", 5: "Ringing", 6: "Up", 3: "Unknown"} {
		if got := amievent.StateDesc(s); got != want {
			t.Errorf("StateDesc(%d) = %q, want %q", s, got, want)
		}
	}
}

// TestEventAllocs: an event built costs its message (text and offsets),
// not a slice of headers besides.
func TestEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled slices")
	}
	c := &amievent.Channel{Name: "PJSIP/201-00000001", State: 6, Num: "201", Context: "from-internal", Exten: "202", Priority: 1, UID: "1.1", Linked: "1.1"}
	d := &amievent.Channel{Name: "PJSIP/202-00000002", State: 5, Num: "202", UID: "1.2", Linked: "1.1"}
	b := &amievent.Bridge{ID: "b1", Type: "basic", Tech: "simple_bridge", Channels: 1}
	for name, f := range map[string]func() ami.Message{
		"channel": func() ami.Message { return amievent.ChannelEvent("Newstate", c) },
		"dial":    func() ami.Message { return amievent.DialEvent("DialBegin", c, d, "DialString", "202") },
		"bridge":  func() ami.Message { return amievent.BridgeEvent("BridgeEnter", b, c) },
	} {
		var m ami.Message
		if n := testing.AllocsPerRun(100, func() { m = f() }); n != 2 {
			t.Errorf("%s: %.0f allocations, want 2", name, n)
		}
		if m.Get("Uniqueid") != "1.1" || m.Get("Privilege") != "call,all" {
			t.Errorf("%s: %q", name, m.Headers())
		}
	}
}
