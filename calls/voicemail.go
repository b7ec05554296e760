package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Voicemail counters of an extension's mailbox (FreePBX: mailbox
// <ext>@default). The PBX announces changes with MessageWaiting. Every
// resync reads them all, whatever Asterisk's modules: VoicemailUsersList
// lists every mailbox of app_voicemail with its counts (app_voicemail
// counts them as MailboxCount would, urgent messages as new, as
// MessageWaiting does), and a mailbox counted before that the list did
// not name (the PBX refused the list, or the mailbox is no longer one of
// its users) is asked MailboxCount. A mailbox never counted is asked
// MailboxCount when something names it: DeviceStateList's MWI:<mailbox>
// devices (res_mwi_devstate), an endpoint's Mailboxes (EndpointDetail).
// A PBX without app_voicemail has no mailboxes: the field stays absent.
// An answer never overrides a MessageWaiting that came after its action
// was sent.

// Voicemail is the message count of an extension's mailbox.
type Voicemail struct {
	Mailbox string // "204@default"
	New     int
	Old     int
}

const mwiPrefix = "MWI:"

// mailboxExt is the extension of a mailbox "204@default": "204".
func (e *Engine) mailboxExt(mailbox string) *extState {
	ext, _, _ := strings.Cut(mailbox, "@")
	return e.extFor(ext)
}

// setVoicemail sets the counts of mailbox from m (a live event, a list
// item or an action's response).
func (e *Engine) setVoicemail(m ami.Message, mailbox string, nw, old int) {
	if mailbox == "" || nw < 0 || old < 0 {
		return
	}
	x := e.mailboxExt(mailbox)
	if x == nil || e.staleItem(m, x.vmAt) {
		return // a MessageWaiting since the list or the action was sent knows better
	}
	x.vmAt = e.liveStamp(m, x.vmAt)
	v := Voicemail{Mailbox: mailbox, New: nw, Old: old}
	if x.vm == nil || *x.vm != v {
		v.Mailbox = strings.Clone(mailbox)
		x.vm = &v
	}
}

// onMessageWaiting: "Mailbox: 204@default", "New: 1", "Old: 0".
func (e *Engine) onMessageWaiting(m ami.Message) {
	e.setVoicemail(m, m.Get("Mailbox"), atoi(m.Get("New")), atoi(m.Get("Old")))
}

// onVoicemailUserEntry is a VoicemailUsersList item.
func (e *Engine) onVoicemailUserEntry(m ami.Message) {
	box := m.Get("VoiceMailbox")
	if ctx := m.Get("VMContext"); ctx != "" && box != "" {
		box += "@" + ctx
	}
	e.setVoicemail(m, box, atoi(m.Get("NewMessageCount")), atoi(m.Get("OldMessageCount")))
}

// onMailboxCountAnswer: the counts are headers of the response itself.
// Asterisk counts urgent messages apart (UrgMessages); MessageWaiting and
// VoicemailUsersList count them as new.
func onMailboxCountAnswer(e *Engine, action ami.Message, resp ami.Response, err error) {
	if err != nil {
		return
	}
	box := resp.Get("Mailbox")
	if box == "" {
		box = action.Get("Mailbox")
	}
	e.setVoicemail(resp.Message, box, atoi(resp.Get("NewMessages"))+atoi(resp.Get("UrgMessages")), atoi(resp.Get("OldMessages")))
}

// voicemailResyncFollowups: every resync reads every mailbox's counts.
func voicemailResyncFollowups(*Engine) []ami.Message {
	return []ami.Message{ami.NewAction(ami.ActionVoicemailUsersList)}
}

// onVoicemailUsersListAnswer: its items set the counts of the mailboxes
// listed (through Apply); a mailbox counted before that it did not list
// (the PBX refused the list, or the mailbox is gone) is counted again
// with MailboxCount, which answers 0 for a mailbox that is no more.
func onVoicemailUsersListAnswer(e *Engine, _ ami.Message, resp ami.Response, _ error) {
	listed := make(map[string]bool, len(resp.Items))
	for _, it := range resp.Items {
		if it.Event() == ami.EventVoicemailUserEntry {
			listed[it.Get("VoiceMailbox")+"@"+it.Get("VMContext")] = true
		}
	}
	for _, x := range e.exts {
		if x.vm != nil && !listed[x.vm.Mailbox] {
			e.ask(ami.NewAction(ami.ActionMailboxCount, "Mailbox", x.vm.Mailbox))
		}
	}
}

// askMailbox queues a MailboxCount for a mailbox whose counts are unknown.
func (e *Engine) askMailbox(mailbox string) {
	if mailbox == "" || strings.ContainsAny(mailbox, "\r\n\x00") {
		return
	}
	if x := e.mailboxExt(mailbox); x != nil && x.vm == nil {
		e.ask(ami.NewAction(ami.ActionMailboxCount, "Mailbox", mailbox))
	}
}
