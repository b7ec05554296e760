package pbxsim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

var recNames = map[string]string{"201": "Alice", "202": "Bob", "203": "Carol", "204": "Dave"}
var recExts = []string{"201", "202", "203", "204"}

// checkpoint names a moment of a scenario in both streams: just before
// the n-th event of that type.
type checkpoint struct {
	event string
	n     int
}

// proof drives one recorded scenario through pbxsim with real SIP user
// agents and checks that calls.Engine reaches the same state from
// pbxsim's AMI stream as from the recording, at each checkpoint and at the
// end.
func proof(t *testing.T, name string, points []checkpoint, drive func(t *testing.T, p *PBX, capt *capture, phones map[string]*Phone)) (want, got []ami.Message) {
	t.Helper()
	p := startPBX(t, Config{RingTimeout: 5 * time.Second})
	phones := map[string]*Phone{}
	for _, x := range recExts {
		cfg := PhoneConfig{Exten: x, RingTime: 200 * time.Millisecond}
		switch {
		case name == "busy_486" && x == "202":
			cfg.Busy = true
		case name == "no_answer_caller_cancel" && x == "202":
			cfg.NoAnswer = true
		case name == "queue_answered" && x == "204":
			cfg.NoAnswer = true // Dave's phone rings until cancelled
		case name == "status_actions_during_call" && (x == "203" || x == "204"):
			cfg.NoAnswer = true // the agents ring and never answer
		}
		phones[x] = startPhone(t, p, cfg)
	}
	capt := startCapture(t, p.AMIAddr())
	drive(t, p, capt, phones)
	waitNoChannels(t, p)
	want = readRecording(t, name)
	got = capt.settle(t, want)
	checkStates(t, name, want, got, points)
	checkHeaders(t, want, got)
	checkShapes(t, got)
	if w, g := cdrsOf(want), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: Cdrs\nrecording: %q\npbxsim:    %q", name, w, g)
	}
	return want, got
}

// cdrsOf sums up the Cdr events of a stream: source, destination, the
// endpoints of both channels, application and disposition.
func cdrsOf(msgs []ami.Message) []string {
	var out []string
	ep := func(ch string) string {
		ep, _, _ := strings.Cut(strings.TrimPrefix(ch, "PJSIP/"), "-")
		return ep
	}
	for _, m := range msgs {
		if m.Event() == "Cdr" {
			out = append(out, fmt.Sprintf("%s>%s %s>%s %s %s", m.Get("Source"), m.Get("Destination"),
				ep(m.Get("Channel")), ep(m.Get("DestinationChannel")), m.Get("LastApplication"), m.Get("Disposition")))
		}
	}
	slices.Sort(out) // the order of concurrent calls' ends is timing
	return out
}

// checkStates asserts that calls.Engine reaches the same per-extension
// state (and queue state for the queue scenarios) from the recording and
// from pbxsim's stream, before each checkpoint and at the end.
func checkStates(t *testing.T, name string, want, got []ami.Message, points []checkpoint) {
	t.Helper()
	for _, cp := range append(points, checkpoint{}) {
		w, g := want, got
		label := "end"
		if cp.event != "" {
			w, g = upTo(want, cp.event, cp.n), upTo(got, cp.event, cp.n)
			label = fmt.Sprintf("before %s #%d", cp.event, cp.n)
		}
		queues := strings.HasPrefix(name, "queue")
		ws, gs := stateOf(t, w, recNames, recExts, queues), stateOf(t, g, recNames, recExts, queues)
		t.Logf("%s, %s: %v", name, label, gs)
		if !reflect.DeepEqual(ws, gs) {
			t.Errorf("%s, %s:\nrecording: %v\npbxsim:    %v", name, label, ws, gs)
		}
	}
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProofBasicCall(t *testing.T) {
	proof(t, "basic_call_caller_hangup", []checkpoint{{"HangupRequest", 1}, {"DialState", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		call, err := ph["201"].Call(ctx5(t), "202")
		if err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		call.Hangup(ctx5(t))
	})
}

func TestProofBusy(t *testing.T) {
	proof(t, "busy_486", []checkpoint{{"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		if _, err := ph["201"].Call(ctx5(t), "202"); err == nil {
			t.Fatal("busy call answered")
		}
	})
}

func TestProofCancel(t *testing.T) {
	proof(t, "no_answer_caller_cancel", []checkpoint{{"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		ctx, cancel := context.WithCancel(ctx5(t))
		go func() {
			capt.waitFor(t, "ringing", func(m []ami.Message) bool {
				return count(m, "DialState") == 1 && count(m, "ExtensionStatus", "Exten", "201", "Status", "1") == 1
			})
			cancel()
		}()
		if _, err := ph["201"].Call(ctx, "202"); err == nil {
			t.Fatal("cancelled call answered")
		}
	})
}

func TestProofHold(t *testing.T) {
	proof(t, "hold_unhold", []checkpoint{{"Unhold", 1}, {"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		call, err := ph["201"].Call(ctx5(t), "202")
		if err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		if err := call.Hold(ctx5(t), true); err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "hold", func(m []ami.Message) bool { return count(m, "MusicOnHoldStart") == 1 })
		if err := call.Hold(ctx5(t), false); err != nil {
			t.Fatal(err)
		}
		capt.waitFor(t, "unhold", func(m []ami.Message) bool { return count(m, "MusicOnHoldStop") == 1 })
		call.Hangup(ctx5(t))
	})
}

// TestProofOriginate drives originate_click_to_call. Each channel's
// events come in the recorded order too: Asterisk creates both channels
// with no account code and sets it after (NewAccountCode).
func TestProofOriginate(t *testing.T) {
	rec, got := proof(t, "originate_click_to_call", []checkpoint{{"HangupRequest", 1}, {"DialBegin", 2}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		res, err := capt.cli.Do(ctx5(t), ami.NewAction("Originate", "Channel", "PJSIP/201", "Context", "from-internal",
			"Exten", "202", "Priority", "1", "CallerID", "201", "Timeout", "30000", "Account", "202", "Async", "true"))
		if err != nil || res.Response() != "Success" {
			t.Fatalf("Originate: %v %v", res, err)
		}
		in := <-ph["202"].Answered()
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		in.Hangup(ctx5(t)) // the callee hangs up, as in the recording
	})
	if w, g := channelEvents(rec), channelEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
}

func TestProofBlindTransferRedirect(t *testing.T) {
	proof(t, "blind_transfer_redirect", []checkpoint{{"BridgeLeave", 1}, {"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		call, err := ph["201"].Call(ctx5(t), "202")
		if err != nil {
			t.Fatal(err)
		}
		msgs := capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		var alice string
		for _, m := range msgs {
			if m.Event() == "Newchannel" && m.Get("CallerIDNum") == "201" {
				alice = m.Get("Channel")
			}
		}
		res, err := capt.cli.Do(ctx5(t), ami.NewAction("Redirect", "Channel", alice, "Context", "from-internal", "Exten", "203", "Priority", "1"))
		if err != nil || res.Response() != "Success" {
			t.Fatalf("Redirect: %v %v", res, err)
		}
		capt.waitFor(t, "second dial", func(m []ami.Message) bool { return count(m, "DialBegin") == 2 })
		var in *PhoneCall
		select {
		case in = <-ph["203"].Answered():
		case <-time.After(5 * time.Second):
			for _, m := range capt.all() {
				t.Log(m.Event(), m.Get("Channel"), m.Get("DialStatus"), m.Get("Cause"))
			}
			t.Fatal("203 never answered")
		}
		capt.waitFor(t, "second bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
		in.Hangup(ctx5(t)) // Carol hangs up
		<-call.Done()
	})
}

func TestProofLoadTrunk(t *testing.T) {
	proof(t, "load_10_calls_5cps", []checkpoint{{"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		var wg sync.WaitGroup
		calls := make([]*PhoneCall, 10)
		for i := range 10 {
			trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: fmt.Sprintf("06110000%02d", i+1)})
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := trunk.Call(ctx5(t), recExts[i%4])
				if err != nil {
					t.Error(err)
					return
				}
				calls[i] = c
			}()
			time.Sleep(200 * time.Millisecond) // 5 calls/s
		}
		wg.Wait()
		capt.waitFor(t, "10 bridges", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 20 })
		for _, c := range calls {
			if c != nil {
				c.Hangup(ctx5(t))
			}
		}
	})
}

// TestBasicCallEventSequence compares, channel by channel, the sequence
// of event types of the basic call with the recording (VarSet, Newexten
// and RTCP noise left out on both sides).
func TestBasicCallEventSequence(t *testing.T) {
	p := startPBX(t, Config{})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "202")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	call.Hangup(ctx5(t))
	got := channelEvents(capt.waitFor(t, "hangup", func(m []ami.Message) bool { return count(m, "Hangup") == 2 }))
	want := channelEvents(readRecording(t, "basic_call_caller_hangup"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", want, got)
	}
}

func TestProofQueueAnswered(t *testing.T) {
	// Checkpoints: both members ringing while the caller waits (before the
	// first DialEnd), Carol connected with the caller (before the caller's
	// HangupRequest), and the end: completed 1, Carol's callsTaken 1.
	proof(t, "queue_answered", []checkpoint{{"DialEnd", 1}, {"HangupRequest", 1}}, func(t *testing.T, p *PBX, capt *capture, ph map[string]*Phone) {
		trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
		call, err := trunk.Call(ctx5(t), "600") // answered by Answer() at once
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ph["203"].Answered():
		case <-time.After(5 * time.Second):
			t.Fatal("203 never answered")
		}
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
		call.Hangup(ctx5(t)) // the caller hangs up
		capt.waitFor(t, "agent complete", func(m []ami.Message) bool { return count(m, "Cdr") == 2 })
	})
}

// TestQueueAnsweredEventSequence compares, channel by channel, the event
// types of the queue call with the recording.
func TestQueueAnsweredEventSequence(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 200 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
	call, err := trunk.Call(ctx5(t), "600")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	call.Hangup(ctx5(t))
	rec := readRecording(t, "queue_answered")
	got := channelEvents(capt.settle(t, rec))
	want := channelEvents(rec)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", want, got)
	}
}
