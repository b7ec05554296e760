package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// recordedAnswer is the recorded response to the action with ActionID id
// in rec and its list items (as ami.Client.Do returns them).
func recordedAnswer(t *testing.T, rec *recording, id string) ami.Response {
	t.Helper()
	var r ami.Response
	for _, m := range rec.msgs {
		if m.ActionID() != id {
			continue
		}
		if m.Kind() == ami.KindResponse {
			r.Message = m
		} else {
			r.Items = append(r.Items, m)
		}
	}
	if r.Message.Len() == 0 {
		t.Fatalf("%s: no response %s", rec.name, id)
	}
	return r
}

// TestVoicemailCountsEveryResync: the bridge counted Dave's mailbox empty
// (mwi_voicemail's first MailboxCount), the link went down, Alice left a
// message meanwhile. The resync after the reconnect, on a PBX that lists
// no MWI devices (no res_mwi_devstate) and whose endpoints name no
// mailboxes, reads every mailbox's counts all the same: VoicemailUsersList
// (answered with the recorded bytes of Asterisk 22) says 204 has 1 new.
func TestVoicemailCountsEveryResync(t *testing.T) {
	rec := loadRecording(t, "mwi_voicemail")
	sent := loadSent(t, "mwi_voicemail")
	e := New(testConfig(nil))
	e.SetLink(LinkLive)
	e.ApplyAnswer(sent["mailboxcount-2"], recordedAnswer(t, rec, "mailboxcount-2"), nil)
	if vm := e.Publish().Extensions.Get("204").Voicemail; vm == nil || vm.New != 0 {
		t.Fatalf("before: %+v", vm)
	}
	e.SetLink(LinkDown)
	e.BeginResync()
	var list ami.Message
	for _, a := range e.Followups(FollowResync) {
		if a.Action() == ami.ActionVoicemailUsersList {
			list = a
		}
	}
	if list.Len() == 0 {
		t.Fatal("the resync does not read the mailboxes")
	}
	e.ApplyAnswer(list, recordedAnswer(t, rec, "voicemailuserslist-6"), nil)
	if got := names(e.Followups(FollowPending)); got != "" {
		t.Errorf("every mailbox listed, yet asked: %s", got)
	}
	e.EndResync()
	s := e.Publish()
	for ext, want := range map[string]Voicemail{"201": {"201@default", 0, 0}, "204": {"204@default", 1, 0}} {
		if vm := s.Extensions.Get(ext).Voicemail; vm == nil || *vm != want {
			t.Errorf("%s after the resync: %+v, want %+v", ext, vm, want)
		}
	}
}

// TestVoicemailListRefused: a PBX that refuses VoicemailUsersList (no
// app_voicemail, or a manager user without the reporting class) gets a
// MailboxCount for each mailbox counted before; its answer counts urgent
// messages as new, as MessageWaiting does.
func TestVoicemailListRefused(t *testing.T) {
	e := New(testConfig(nil))
	e.SetLink(LinkLive)
	e.Apply(ev("MessageWaiting", "Mailbox", "204@default", "Waiting", "1", "New", "2", "Old", "1"))
	e.Publish()
	e.SetLink(LinkDown)
	e.BeginResync()
	list := ami.NewAction(ami.ActionVoicemailUsersList)
	e.ApplyAnswer(list, ami.Response{}, &ami.ActionError{Action: list.Action(),
		Message: "Invalid/unknown command: VoicemailUsersList. Use Action: ListCommands to show available commands."})
	asked := e.Followups(FollowPending)
	if got := names(asked); got != "MailboxCount 204@default" {
		t.Fatalf("asked %q, want MailboxCount 204@default", got)
	}
	resp := ami.Response{Message: ami.NewMessage(ami.Header{Key: "Response", Value: "Success"},
		ami.Header{Key: "Message", Value: "Mailbox Message Count"}, ami.Header{Key: "Mailbox", Value: "204@default"},
		ami.Header{Key: "UrgMessages", Value: "1"}, ami.Header{Key: "NewMessages", Value: "0"}, ami.Header{Key: "OldMessages", Value: "3"})}
	e.ApplyAnswer(asked[0], resp, nil)
	e.EndResync()
	if vm := e.Publish().Extensions.Get("204").Voicemail; vm == nil || vm.New != 1 || vm.Old != 3 {
		t.Errorf("after MailboxCount: %+v, want 1 new (urgent), 3 old", vm)
	}
}

// TestVoicemailListOlderThanEvent: a MessageWaiting that came after the
// resync handed VoicemailUsersList out wins over the list's older count.
func TestVoicemailListOlderThanEvent(t *testing.T) {
	rec := loadRecording(t, "mwi_voicemail")
	e := New(testConfig(nil))
	e.BeginResync()
	var list ami.Message
	for _, a := range e.Followups(FollowResync) {
		if a.Action() == ami.ActionVoicemailUsersList {
			list = a
		}
	}
	e.Apply(ev("MessageWaiting", "Mailbox", "204@default", "Waiting", "1", "New", "2", "Old", "0"))
	e.ApplyAnswer(list, recordedAnswer(t, rec, "voicemailuserslist-6"), nil) // 204: 1 new
	e.EndResync()
	if vm := e.Publish().Extensions.Get("204").Voicemail; vm == nil || vm.New != 2 {
		t.Errorf("204: %+v, want the live event's 2 new", vm)
	}
}
