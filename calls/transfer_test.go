package calls

import (
	"testing"
	"time"

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

// TestAtxferConsultNamesTarget: atxfer_complete's moments 2 and 3 (the
// .md): from the moment Alice (201) enters the consult bridge with
// Local/203@from-internal-00000002;1 until Carol (203) answers, Alice's
// consult call names Carol, never Bob (202) who waits on hold, and
// carries the Local half as its leg; her held call names Bob.
func TestAtxferConsultNamesTarget(t *testing.T) {
	rec := loadRecording(t, "atxfer_complete")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	const l1 = "Local/203@from-internal-00000002;1"
	from := msgIndex(t, rec, "BridgeEnter Channel=PJSIP/201-00000015 BridgeUniqueid=550aafc6-e5e5-498e-808e-6d631cab44ed")
	to := msgIndex(t, rec, "Newstate Channel=PJSIP/203-00000017 ChannelState=6")
	for i, m := range rec.msgs[:to] {
		clk.Observe(m)
		e.Apply(m)
		if i < from {
			continue
		}
		var consults int
		for _, cv := range e.Publish().Extensions.Get("201").Conversations {
			tr := cv.Extras().Transfer
			if tr.Role != "transferer" || tr.State != "consulting" {
				t.Fatalf("#%d Alice's call %s: transfer %+v", i, cv.ID, tr)
			}
			if !tr.Consult {
				if cv.CounterpartNum != "202" {
					t.Errorf("#%d Alice's held call names %q, want 202", i, cv.CounterpartNum)
				}
				continue
			}
			consults++
			if cv.CounterpartNum != "203" || tr.Leg != l1 || cv.Connected {
				t.Errorf("#%d %s: Alice's consult call names %q %q, leg %q, connected %v; want 203, leg %s, ringing",
					i, summary(m), cv.CounterpartNum, cv.CounterpartName, tr.Leg, cv.Connected, l1)
			}
		}
		if consults != 1 {
			t.Fatalf("#%d %s: Alice has %d consult calls", i, summary(m), consults)
		}
	}
}

// atxferListed is what the resync lists of a bridge restarted during
// atxfer_complete's consultation give (CoreShowChannels), written from
// the channels and bridges of its .md and recording: Alice (201) bridged
// with Local/203@from-internal-00000002;1 in the consult bridge, Bob (202)
// alone in the original bridge, the Local pair's ;2 dialling Carol (203),
// and, once she answered, ;2 and Carol in a third bridge.
func atxferListed(answered bool) []ami.Message {
	const (
		linked           = "1796111575.25"
		held, cons, tgtB = "9b7a85c4-596e-404f-8fb1-ea2182bd159e", "550aafc6-e5e5-498e-808e-6d631cab44ed", "76acccf4-0c5d-4ff1-97c2-a75450eaa233"
	)
	item := func(name, uid, state, cid, cname, conn, exten, app, bridge string) ami.Message {
		return amitest.Event("CoreShowChannel", "ActionID", "coreshowchannels-1", "Channel", name,
			"ChannelState", state, "CallerIDNum", cid, "CallerIDName", cname, "ConnectedLineNum", conn,
			"Context", "from-internal", "Exten", exten, "Priority", "1", "Uniqueid", uid, "Linkedid", linked,
			"Application", app, "Duration", "00:00:06", "BridgeId", bridge)
	}
	carolState, carolBridge := "5", ""
	if answered {
		carolState, carolBridge = "6", tgtB
	}
	return []ami.Message{
		item("PJSIP/201-00000015", "1796111575.25", "6", "201", "Alice Rossi", "203", "202", "Dial", cons),
		item("PJSIP/202-00000016", "1796111575.26", "6", "202", "Bob Bianchi", "201", "s", "AppDial", held),
		item("Local/203@from-internal-00000002;1", "1796111580.27", carolState, "203", "Carol Verdi", "201", "203", "", cons),
		item("Local/203@from-internal-00000002;2", "1796111580.28", carolState, "201", "Alice Rossi", "203", "203", "Dial", carolBridge),
		item("PJSIP/203-00000017", "1796111580.29", carolState, "203", "Carol Verdi", "201", "203", "AppDial", carolBridge),
		amitest.Event("CoreShowChannelsComplete", "ActionID", "coreshowchannels-1", "ListItems", "5"),
	}
}

// TestAtxferAfterRestart: a bridge restarted during atxfer_complete's
// consultation (moment 2, Carol ringing; moment 3, Carol answered) knows
// the transfer again from the resync lists alone: Alice's two calls, the
// held one with Bob and the consult with Carol (its leg the Local half),
// both marked as her transfer being consulted, Bob as the transferee and,
// once she answered, Carol as the target. atxfer_complete and
// atxfer_cancel rely on these markers.
func TestAtxferAfterRestart(t *testing.T) {
	for _, answered := range []bool{false, true} {
		clk := &fakeClock{t: time.Unix(1796111582, 0)}
		e := New(testConfig(clk.Now))
		e.BeginResync()
		for _, m := range atxferListed(answered) {
			e.Apply(m)
		}
		e.EndResync()
		s := e.Publish()
		alice := s.Extensions.Get("201").Conversations
		if len(alice) != 2 {
			t.Fatalf("answered %v: Alice has %d calls, want the held one and the consult: %v", answered, len(alice), alice)
		}
		const xid = "1796111575.25"
		for id, cv := range alice {
			tr := cv.Extras().Transfer
			want := Transfer{ID: xid, State: "consulting", Role: "transferer"}
			num := "202"
			if tr.Consult {
				want.Consult, want.Leg, num = true, "Local/203@from-internal-00000002;1", "203"
			}
			if tr != want || cv.CounterpartNum != num {
				t.Errorf("answered %v: Alice's %s: %s %+v, want %s %+v", answered, id, cv.CounterpartNum, tr, num, want)
			}
		}
		for _, cv := range s.Extensions.Get("202").Conversations {
			if tr := cv.Extras().Transfer; tr.Role != "transferee" || tr.ID != xid || cv.CounterpartNum != "201" {
				t.Errorf("answered %v: Bob's call %s %+v", answered, cv.CounterpartNum, tr)
			}
		}
		for _, cv := range s.Extensions.Get("203").Conversations {
			if tr := cv.Extras().Transfer; tr.Role != "target" || tr.ID != xid || cv.CounterpartNum != "201" || cv.Connected != answered {
				t.Errorf("answered %v: Carol's call %+v %+v", answered, cv, tr)
			}
		}
	}
}

// TestAtxferBlond: Alice (201) hangs up while Carol (203) still rings, a
// blonde transfer. No recording has one: the stream is atxfer_complete's
// own messages, reordered as Asterisk 22 runs it (bridge_basic.c: from
// "Calling Target", the transferer's hangup merges the consult bridge
// into the held one and reports the transfer, as a completion does; the
// target answers later): up to Carol ringing, then Alice's hangup through
// her Hangup (the merge, Bob off hold, AttendedTransfer), then Carol's
// answer, then the Local pair's optimisation. Bob, the transferee, waits
// for Carol (not connected, her number, the transfer completed), then
// talks with her; Alice has no call left.
func TestAtxferBlond(t *testing.T) {
	rec := loadRecording(t, "atxfer_complete")
	answer := msgIndex(t, rec, "Newstate Channel=PJSIP/203-00000017 ChannelState=6")
	leave := msgIndex(t, rec, "HangupRequest Channel=PJSIP/201-00000015")
	gone := msgIndex(t, rec, "Hangup Channel=PJSIP/201-00000015")
	var stream []ami.Message
	stream = append(stream, rec.msgs[:answer]...)
	stream = append(stream, rec.msgs[leave:gone+1]...)
	merged := len(stream)
	stream = append(stream, rec.msgs[answer:leave]...)
	stream = append(stream, rec.msgs[gone+1:]...)
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	bob := func(i int) Conversation {
		t.Helper()
		cs := e.Publish().Extensions.Get("202").Conversations
		if len(cs) != 1 {
			t.Fatalf("#%d: Bob has %d calls", i, len(cs))
		}
		for _, cv := range cs {
			return cv
		}
		return Conversation{}
	}
	for i, m := range stream {
		clk.Observe(m)
		e.Apply(m)
		if i == merged-1 {
			s := e.Publish()
			if n := len(s.Extensions.Get("201").Conversations); n != 0 {
				t.Errorf("Alice hung up: %d calls left", n)
			}
			cv := bob(i)
			want := Transfer{ID: "1796111575.25", State: "completed", Role: "transferee"}
			if cv.CounterpartNum != "203" || cv.Connected || cv.Extras().Transfer != want {
				t.Errorf("Bob after the blonde transfer: %s connected %v %+v; want 203, waiting, %+v",
					cv.CounterpartNum, cv.Connected, cv.Extras().Transfer, want)
			}
			for _, cv := range s.Extensions.Get("203").Conversations {
				if cv.CounterpartNum != "202" || cv.Connected || cv.Extras().Transfer.Role != "target" {
					t.Errorf("Carol ringing for Bob: %s connected %v %+v", cv.CounterpartNum, cv.Connected, cv.Extras().Transfer)
				}
			}
			if st := s.Extensions.Get("203").Status; st != "ringing" {
				t.Errorf("Carol's status %q, want ringing", st)
			}
		}
		if m.Event() == "LocalOptimizationEnd" {
			if cv := bob(i); cv.CounterpartNum != "203" || !cv.Connected {
				t.Errorf("Bob after Carol's answer: %s connected %v; want talking with 203", cv.CounterpartNum, cv.Connected)
			}
		}
	}
}
