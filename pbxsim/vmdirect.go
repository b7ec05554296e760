package pbxsim

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Dialling a mailbox directly, as FreePBX's dialplan offers it: vmu<ext>
// (ext-local: the unavailable greeting, what NethCTI's voicemail
// presence and a transfer to voicemail use) and *<ext> (the direct dial
// to voicemail). The call, a new one or a redirected one, goes straight
// to VoiceMail(<ext>@default,u), without ringing <ext>.

// directMailbox is the mailbox target dials directly, if it is one.
func (p *PBX) directMailbox(target string) (string, bool) {
	box, ok := strings.CutPrefix(target, "vmu")
	if !ok {
		box, ok = strings.CutPrefix(target, "*")
	}
	if !ok || box == "" {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return box, p.mailboxOf(box) != nil
}

// voicemailDirect answers a and records its message for box.
func (c *call) voicemailDirect(a *channel, box string) (*channel, string) {
	p := c.p
	p.mu.Lock()
	a.priority = 1
	a.app, a.appData = "VoiceMail", box+"@default,u"
	if a.context == "from-trunk" {
		a.context = p.cfg.Context
	}
	a.progressed = true
	p.emit(chanEvent(ami.EventNewexten, a, "Extension", a.exten, "Application", a.app, "AppData", a.appData))
	c.answer(a, p.sdp(p.chanSeq, false))
	p.mu.Unlock()
	return c.voicemail(a, box)
}
