package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// A call the dialplan sends to VoiceMail (an unanswered extension's
// fallback, a direct dial of a mailbox) is answered by the application
// on the caller's own channel: Newexten "Application: VoiceMail",
// "AppData: 204@default,u", then Newstate Up. From then the caller's
// conversation is with the mailbox (counterpart its number, "voicemail"
// flagged), answered when VoiceMail answered; the phone it rang before is
// no part of it (its channel hangs up right after). The next Newexten
// (the dialplan goes on) or the hangup ends it.

// onNewexten follows the dialplan application a channel runs, for
// VoiceMail only: entering it, or leaving it for another. Most Newexten
// are neither: one header is read (Newexten are a third of a FreePBX
// call's events).
func (e *Engine) onNewexten(m ami.Message) {
	vm := isVoicemailApp(appOf(m))
	if !vm && e.inVM == 0 {
		return // nobody in VoiceMail: nothing to leave
	}
	c := e.chanBy(m.Get("Uniqueid"), m.Get("Channel"))
	if c == nil || (!vm && c.get().mailbox == "") {
		return
	}
	e.updateCommon(c, m) // stamped live: an older list item does not undo it
	if vm {
		at := int64(0)
		if c.state == stateUp {
			at = e.nowMs() // already up (an IVR answered it): VoiceMail takes it now
		}
		e.enterVoicemail(c, m.Get("AppData"), at)
	} else {
		e.leaveVoicemail(c)
	}
}

// appOf is a Newexten's Application. Asterisk writes it second to last
// (Extension, Application, AppData): looked for there first, it costs a
// few ns, not a walk of the twenty headers before it.
func appOf(m ami.Message) string {
	for i := m.Len() - 1; i >= 0 && i >= m.Len()-3; i-- {
		if h := m.Header(i); h.Key == "Application" {
			return h.Value
		}
	}
	return m.Get("Application")
}

func isVoicemailApp(app string) bool {
	return len(app) == len("VoiceMail") && (app == "VoiceMail" || strings.EqualFold(app, "VoiceMail"))
}

// enterVoicemail marks c as recording for the first mailbox of VoiceMail's
// arguments ("204@default&205@default,u"); answered at at when it is up
// and was not answered before (0: not yet).
func (e *Engine) enterVoicemail(c *channel, args string, at int64) {
	box, _, _ := strings.Cut(args, ",")
	box, _, _ = strings.Cut(box, "&")
	box = strings.TrimSpace(box)
	if box == "" || strings.ContainsAny(box, "\r\n\x00") {
		return
	}
	more := c.more()
	if more.mailbox == "" {
		e.inVM++
	}
	if more.mailbox != box {
		more.mailbox = strings.Clone(box)
	}
	if at != 0 && c.answeredAt == 0 {
		c.answeredAt = at
	}
	e.changed(c)
}

// leaveVoicemail: c runs another application.
func (e *Engine) leaveVoicemail(c *channel) {
	if c.get().mailbox == "" {
		return
	}
	c.m.mailbox = ""
	e.inVM--
	e.changed(c)
}

// listedApp applies what a CoreShowChannel item says of the application
// c runs: VoiceMail (answered, at the latest, when the channel began:
// the best bound a list gives) or another one.
func (e *Engine) listedApp(c *channel, app, data string) {
	switch {
	case isVoicemailApp(app):
		at := int64(0)
		if c.state == stateUp {
			at = c.created
		}
		e.enterVoicemail(c, data, at)
	default:
		e.leaveVoicemail(c)
	}
}

// voicemailConv makes cv the conversation of c, running VoiceMail for
// mailbox box, with that mailbox.
func (e *Engine) voicemailConv(cv *Conversation, c *channel, box string) {
	cv.Voicemail = true
	cv.Connected = c.answeredAt != 0 && c.state == stateUp
	num, _, _ := strings.Cut(box, "@")
	cv.CounterpartNum = num
	cv.CounterpartName = e.nameOf(num)
}
