package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Voicemail counters of an extension's mailbox (FreePBX: mailbox
// <ext>@default). The PBX announces changes with MessageWaiting; at a
// resync DeviceStateList lists one MWI:<mailbox> device per mailbox, and
// the engine asks MailboxCount for each (and for the Mailboxes an
// EndpointDetail names). A PBX without app_voicemail has no MWI devices:
// the field stays absent.

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

func (e *Engine) setVoicemail(mailbox string, nw, old int) {
	if mailbox == "" || nw < 0 || old < 0 {
		return
	}
	x := e.mailboxExt(mailbox)
	if x == nil {
		return
	}
	v := Voicemail{Mailbox: mailbox, New: nw, Old: old}
	if x.vm == nil || *x.vm != v {
		v.Mailbox = strings.Clone(mailbox)
		x.vm = &v
	}
}

// onMessageWaiting: "Mailbox: 204@default", "New: 1", "Old: 0".
func (e *Engine) onMessageWaiting(m ami.Message) {
	e.setVoicemail(m.Get("Mailbox"), atoi(m.Get("New")), atoi(m.Get("Old")))
}

// onVoicemailUserEntry is a VoicemailUsersList item.
func (e *Engine) onVoicemailUserEntry(m ami.Message) {
	box := m.Get("VoiceMailbox")
	if ctx := m.Get("VMContext"); ctx != "" && box != "" {
		box += "@" + ctx
	}
	e.setVoicemail(box, atoi(m.Get("NewMessageCount")), atoi(m.Get("OldMessageCount")))
}

// onMailboxCountAnswer: the counts are headers of the response itself.
func onMailboxCountAnswer(e *Engine, action ami.Message, resp ami.Response, err error) {
	if err != nil {
		return
	}
	box := resp.Get("Mailbox")
	if box == "" {
		box = action.Get("Mailbox")
	}
	e.setVoicemail(box, atoi(resp.Get("NewMessages")), atoi(resp.Get("OldMessages")))
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
