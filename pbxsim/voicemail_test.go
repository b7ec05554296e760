package pbxsim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestProofMWIVoicemail drives mwi_voicemail: Alice calls Dave, who never
// answers; after the ring timeout the call goes to Dave's voicemail, Alice
// leaves a message and hangs up: MessageWaiting, MWI device INUSE, the
// mailbox actions' answers, per-endpoint event sequences and Cdrs as the
// recording's.
func TestProofMWIVoicemail(t *testing.T) {
	exts := []Extension{{"201", "Alice Rossi"}, {"202", "Bob Bianchi"}, {"203", "Carol Verdi"}, {"204", "Dave Neri"}}
	p := startPBX(t, Config{Extensions: exts, Mailboxes: []string{"201", "202", "203", "204"}, RingTimeout: time.Second})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var answers []ami.Message
	do := func(kv ...string) {
		t.Helper()
		res, err := capt.cli.Do(ctx, ami.NewAction(kv[0], kv[1:]...))
		if err != nil {
			t.Fatalf("%s: %v", kv[0], err)
		}
		answers = append(append(answers, res.Message), res.Items...)
	}
	do("MailboxCount", "ActionID", "mailboxcount-2", "Mailbox", "204@default")
	do("MailboxStatus", "ActionID", "mailboxstatus-3", "Mailbox", "204@default")
	call, err := alice.Call(ctx, "204") // answered by the voicemail
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the message
	call.Hangup(ctx)
	waitNoChannels(t, p)
	capt.waitFor(t, "message", func(m []ami.Message) bool { return count(m, "MessageWaiting") == 1 })
	do("MailboxCount", "ActionID", "mailboxcount-4", "Mailbox", "204@default")
	do("MailboxStatus", "ActionID", "mailboxstatus-5", "Mailbox", "204@default")
	do("VoicemailUsersList", "ActionID", "voicemailuserslist-6")
	rec := readRecording(t, "mwi_voicemail")
	got := capt.settle(t, rec)
	checkHeaders(t, rec, got)
	checkStates(t, "mwi_voicemail", rec, got, []checkpoint{{"DialEnd", 1}, {"HangupRequest", 1}})
	var recAnswers []ami.Message
	for _, m := range rec {
		if id := m.ActionID(); id != "" && !strings.HasPrefix(id, "log") && !strings.HasPrefix(id, "devicestatelist") {
			recAnswers = append(recAnswers, m)
		}
	}
	sum := func(msgs []ami.Message) []string {
		var out []string
		for _, m := range msgs {
			switch {
			case m.Response() != "":
				out = append(out, fmt.Sprintf("%s %s %s new=%s old=%s waiting=%s", m.ActionID(), m.Response(), m.Get("Message"),
					m.Get("NewMessages"), m.Get("OldMessages"), m.Get("Waiting")))
			case m.Event() == "VoicemailUserEntry":
				out = append(out, fmt.Sprintf("%s %s %q new=%s", m.ActionID(), m.Get("VoiceMailbox"), m.Get("Fullname"), m.Get("NewMessageCount")))
			}
		}
		return out
	}
	if w, g := sum(recAnswers), sum(answers); !reflect.DeepEqual(w, g) {
		t.Errorf("answers differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	// VoicemailUserEntry as app_voicemail writes it: every header, in order.
	entryKeys := func(msgs []ami.Message) string {
		for _, m := range msgs {
			if m.Event() == "VoicemailUserEntry" {
				var keys []string
				for _, h := range m.Headers() {
					keys = append(keys, h.Key)
				}
				return strings.Join(keys, ",")
			}
		}
		return ""
	}
	if w, g := entryKeys(recAnswers), entryKeys(answers); w != g {
		t.Errorf("VoicemailUserEntry headers differ:\nrecording: %s\npbxsim:    %s", w, g)
	}
	if w, g := endpointEvents(rec), endpointEvents(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-endpoint event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
	if w, g := cdrsOf(rec), cdrsOf(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	mwi := func(msgs []ami.Message) []string {
		var out []string
		for _, m := range msgs {
			if m.Event() == "MessageWaiting" || (m.Event() == "DeviceStateChange" && strings.HasPrefix(m.Get("Device"), "MWI:") && m.ActionID() == "") {
				out = append(out, m.Event()+" "+m.Get("Mailbox")+m.Get("Device")+" "+m.Get("New")+m.Get("State"))
			}
		}
		return out
	}
	if w, g := mwi(rec), mwi(got); !reflect.DeepEqual(w, g) {
		t.Errorf("MWI events differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
}

// TestVoicemailUsersListNoUsers: with no mailbox defined app_voicemail
// answers VoicemailUsersList with a plain acknowledgement, no list
// (manager_list_voicemail_users); MailboxCount without a mailbox is an
// error (manager.c's action_mailboxcount).
func TestVoicemailUsersListNoUsers(t *testing.T) {
	p := startPBX(t, Config{Extensions: []Extension{{"201", "Alice Rossi"}}})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := capt.cli.Do(ctx, ami.NewAction("VoicemailUsersList"))
	if err != nil || res.Get("Response") != "Success" || res.Get("Message") != "There are no voicemail users currently defined." ||
		res.Get("EventList") != "" || len(res.Items) != 0 {
		t.Errorf("VoicemailUsersList: %v %v %d items", err, res.Message, len(res.Items))
	}
	_, err = capt.cli.Do(ctx, ami.NewAction("MailboxCount"))
	var ae *ami.ActionError
	if !errors.As(err, &ae) || ae.Message != "Mailbox not specified" {
		t.Errorf("MailboxCount without a mailbox: %v", err)
	}
}
