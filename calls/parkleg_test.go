package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// TestPickupParkingLeg: in park_retrieve Bob (202) parks Alice (201) on
// 701 and hangs up. pickup_parking then rings 204 first (an Originate
// with Account 701, as rest plans it; the leg's events are built with the
// headers of originate_click_to_call's first leg): 204's ringing
// conversation names Alice, who waits there, not the space and not 204
// itself. When Alice gives up the space names nobody: the leg shows 701.
func TestPickupParkingLeg(t *testing.T) {
	rec := loadRecording(t, "park_retrieve")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs[:msgIndex(t, rec, "Hangup Channel=PJSIP/202-00000013")+1] {
		clk.Observe(m)
		e.Apply(m)
	}
	if pc := e.Publish().Parkings["701"].ParkedCaller; pc == nil || pc.Num != "201" {
		t.Fatalf("701: %+v, want Alice parked", pc)
	}
	picker := "PJSIP/204-00000020"
	leg := func(ev string, kv ...string) ami.Message {
		return amitest.Event(ev, append([]string{"Channel", picker, "ChannelState", "0", "CallerIDNum", "204", "CallerIDName", "<unknown>",
			"ConnectedLineNum", "204", "ConnectedLineName", "<unknown>", "Context", "from-internal", "Exten", "s",
			"Uniqueid", "1796028600.40", "Linkedid", "1796028600.40"}, kv...)...)
	}
	for _, m := range []ami.Message{
		leg("Newchannel", "AccountCode", ""),
		leg("NewAccountCode", "AccountCode", "701"),
		amitest.Event("DialBegin", "DestChannel", picker, "DestUniqueid", "1796028600.40", "DialString", "204"),
		leg("Newstate", "ChannelState", "5"),
	} {
		e.Apply(m)
	}
	check := func(label, num, name string) {
		t.Helper()
		convs := e.Publish().Extensions.Get("204").Conversations
		if len(convs) != 1 {
			t.Fatalf("%s: 204 has %d conversations", label, len(convs))
		}
		for _, cv := range convs {
			if cv.CounterpartNum != num || cv.CounterpartName != name || cv.Direction != "out" || cv.Connected {
				t.Errorf("%s: 204's ringing leg %+v, want %s %q, out, not connected", label, cv, num, name)
			}
		}
	}
	check("Alice parked", "201", "Alice")
	e.Apply(amitest.Event("ParkedCallGiveUp", "ParkeeChannel", "PJSIP/201-00000012", "ParkeeUniqueid", "1796028541.18",
		"ParkingSpace", "701", "Parkinglot", "default"))
	check("Alice gave up", "701", "")
}
