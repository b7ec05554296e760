package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// TestAtxferCancelled: Carol (203) answered Bob's consult call in the
// attended_transfer_atxfer recording; then she hangs up and Asterisk puts
// Bob back with Alice. No recording of a cancelled transfer exists yet:
// the events after the recorded consult are built with the headers of the
// recorded ones (Hangup, BridgeLeave, BridgeEnter of the same channels and
// bridges). Bob is left with one call, Alice, and every party shows the
// transfer as cancelled; a second Atxfer is a new transfer.
func TestAtxferCancelled(t *testing.T) {
	rec := loadRecording(t, "attended_transfer_atxfer")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs[:msgIndex(t, rec, "BridgeEnter Channel=Local/203@from-internal-00000000;2")+1] {
		clk.Observe(m)
		e.Apply(m)
	}
	if n := len(e.Publish().Extensions.Get("202").Conversations); n != 2 {
		t.Fatalf("Bob consulting: %d conversations, want 2", n)
	}
	const (
		bob, carol     = "PJSIP/202-0000001c", "PJSIP/203-0000001d"
		l1, l2         = "Local/203@from-internal-00000000;1", "Local/203@from-internal-00000000;2"
		held, consult  = "bd735a8e-64fb-4bb2-ad7b-19084f7a230a", "1718fa2b-31be-4f8b-9eb1-8cd3e94ce208"
		bobUID, carUID = "1796028590.28", "1796028595.31"
	)
	ch := func(ev, name, uid string, kv ...string) ami.Message {
		return amitest.Event(ev, append([]string{"Channel", name, "ChannelState", "6", "Uniqueid", uid, "Linkedid", "1796028590.27"}, kv...)...)
	}
	for _, m := range []ami.Message{
		ch("Hangup", carol, carUID, "Cause", "16"),
		ch("Hangup", l2, "1796028595.30", "Cause", "16"),
		ch("BridgeLeave", l1, "1796028595.29", "BridgeUniqueid", consult),
		ch("Hangup", l1, "1796028595.29", "Cause", "16"),
		ch("BridgeLeave", bob, bobUID, "BridgeUniqueid", consult),
		ch("BridgeEnter", bob, bobUID, "BridgeUniqueid", held, "BridgeType", "basic", "BridgeTechnology", "simple_bridge"),
	} {
		e.Apply(m)
	}
	s := e.Publish()
	want := Transfer{ID: bobUID, State: "cancelled", Role: "transferer"}
	if cs := s.Extensions.Get("202").Conversations; len(cs) != 1 {
		t.Fatalf("Bob after the cancel: %v", cs)
	}
	for _, cv := range s.Extensions.Get("202").Conversations {
		if cv.CounterpartNum != "201" || !cv.Connected || cv.Extras().Transfer != want {
			t.Errorf("Bob's call after the cancel: %+v %+v", cv, cv.Extras())
		}
	}
	for _, cv := range s.Extensions.Get("201").Conversations {
		if cv.CounterpartNum != "202" || cv.Extras().Transfer.State != "cancelled" {
			t.Errorf("Alice after the cancel: %+v %+v", cv, cv.Extras())
		}
	}
	// Bob tries again: a new consult bridge, a new transfer id.
	for _, m := range []ami.Message{
		ch("BridgeLeave", bob, bobUID, "BridgeUniqueid", held),
		ch("BridgeEnter", bob, bobUID, "BridgeUniqueid", "second", "BridgeType", "basic", "BridgeTechnology", "simple_bridge"),
	} {
		e.Apply(m)
	}
	for _, cv := range e.Publish().Extensions.Get("202").Conversations {
		if tr := cv.Extras().Transfer; tr.ID != bobUID+"/2" || tr.State != "consulting" {
			t.Errorf("second transfer: %+v", tr)
		}
	}
}
