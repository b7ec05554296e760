package pbxsim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestProofQueueDynamicMembers drives queue_dynamic_members through
// pbxsim: the same actions with the same ActionIDs, a trunk caller
// answered by the dynamic member. Compared with the recording: every
// answer (status and message), the member events of PJSIP/201, the
// QueueSummary and QueueMember items, the per-channel event sequences and
// the Cdrs.
func TestProofQueueDynamicMembers(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201", RingTime: 300 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "203", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	var answers []ami.Message
	do := func(kv ...string) {
		t.Helper()
		res, err := capt.cli.Do(ctx5(t), ami.NewAction(kv[0], kv[1:]...))
		if err != nil {
			t.Fatalf("%s: %v", kv[0], err)
		}
		answers = append(append(answers, res.Message), res.Items...)
	}
	do("QueueAdd", "ActionID", "queueadd-2", "Queue", "support", "Interface", "PJSIP/201", "MemberName", "Alice Rossi", "Paused", "false")
	do("QueuePause", "ActionID", "queuepause-3", "Queue", "support", "Interface", "PJSIP/201", "Paused", "true", "Reason", "lunch")
	do("QueueStatus", "ActionID", "queuestatus-4", "Queue", "support")
	do("QueueSummary", "ActionID", "queuesummary-5", "Queue", "support")
	do("QueuePause", "ActionID", "queuepause-6", "Queue", "support", "Interface", "PJSIP/201", "Paused", "false")
	do("QueueStatus", "ActionID", "queuestatus-7", "Queue", "support", "Member", "PJSIP/201")
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
	call, err := trunk.Call(ctx5(t), "600")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	do("QueueStatus", "ActionID", "queuestatus-8", "Queue", "support")
	call.Hangup(ctx5(t))
	capt.waitFor(t, "cdrs", func(m []ami.Message) bool { return count(m, "Cdr") == 3 })
	do("QueueRemove", "ActionID", "queueremove-9", "Queue", "support", "Interface", "PJSIP/201")
	do("QueueStatus", "ActionID", "queuestatus-10", "Queue", "support")
	do("QueueSummary", "ActionID", "queuesummary-11", "Queue", "support")
	waitNoChannels(t, p)
	rec := readRecording(t, "queue_dynamic_members")
	capt.settle(t, rec)
	var recAnswers []ami.Message
	for _, m := range rec {
		if id := m.ActionID(); id != "" && !strings.HasPrefix(id, "log") && m.Event() != "OriginateResponse" {
			recAnswers = append(recAnswers, m)
		}
	}
	if w, g := answerSummary(recAnswers), answerSummary(answers); !reflect.DeepEqual(w, g) {
		t.Errorf("answers differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	got := capt.all()
	checkHeaders(t, rec, got)
	checkStates(t, "queue_dynamic_members", rec, got, []checkpoint{{"DialEnd", 1}, {"HangupRequest", 1}})
	if w, g := memberEvents(rec), memberEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("member events of PJSIP/201 differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	if w, g := endpointEvents(rec), endpointEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-channel event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
	if w, g := cdrsOf(rec), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	agents := func(msgs []ami.Message) []string {
		var out []string
		for _, m := range msgs {
			if strings.HasPrefix(m.Event(), "Agent") {
				out = append(out, m.Event()+" "+m.Get("Interface")+" "+m.Get("MemberName")+" "+m.Get("Reason"))
			}
		}
		slices.Sort(out) // the members ring in app_queue's order
		return out
	}
	if w, g := agents(rec), agents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Agent events differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
}

// answerSummary sums up action answers: responses with their message,
// QueueSummary counts, QueueMember identity and pause state. Members are
// sorted within each answer: app_queue lists them in the order of its
// hash container.
func answerSummary(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		switch {
		case m.Response() != "":
			out = append(out, m.ActionID()+" "+m.Response()+" "+m.Get("Message"))
		case m.Event() == "QueueSummary":
			out = append(out, fmt.Sprintf("%s summary loggedin=%s available=%s callers=%s", m.ActionID(), m.Get("LoggedIn"), m.Get("Available"), m.Get("Callers")))
		case m.Event() == "QueueMember":
			out = append(out, fmt.Sprintf("%s member %s %q %s paused=%s %q incall=%s calls=%s", m.ActionID(), m.Get("Location"), m.Get("Name"),
				m.Get("Membership"), m.Get("Paused"), m.Get("PausedReason"), m.Get("InCall"), m.Get("CallsTaken")))
		case m.Event() == "QueueParams":
			out = append(out, fmt.Sprintf("%s params calls=%s completed=%s abandoned=%s", m.ActionID(), m.Get("Calls"), m.Get("Completed"), m.Get("Abandoned")))
		}
	}
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.Contains(out[j], " member ") {
			j++
		}
		slices.Sort(out[i:j]) // a run of QueueMember items of one answer
		i = max(j, i+1)
	}
	return out
}

// memberEvents lists the membership and pause events of PJSIP/201.
func memberEvents(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		switch m.Event() {
		case "QueueMemberAdded", "QueueMemberRemoved", "QueueMemberPause":
			if m.Get("Interface") == "PJSIP/201" {
				out = append(out, fmt.Sprintf("%s %q %s paused=%s %q calls=%s", m.Event(), m.Get("MemberName"), m.Get("Membership"),
					m.Get("Paused"), m.Get("PausedReason"), m.Get("CallsTaken")))
			}
		}
	}
	return out
}
