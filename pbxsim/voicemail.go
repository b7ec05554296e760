package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// Voicemail as the recordings' dialplan runs it (mwi_voicemail): a call to
// an extension with a mailbox (Config.Mailboxes) that is not answered
// within the ring timeout, or is refused busy, goes to
// VoiceMail(<ext>@default,u): the caller is answered and, when it hangs up
// (or after MaxMessageLength, 60 s), a new message is stored:
// MessageWaiting, DeviceStateChange MWI:<ext>@default INUSE. MailboxCount,
// MailboxStatus, VoicemailUsersList and DeviceStateList report the
// mailboxes. No audio is recorded.

const vmMaxMessage = 60 * time.Second

// mailbox is one voicemail box, guarded by PBX.mu.
type mailbox struct {
	num      string
	new, old int
}

// mailboxOf is exten's mailbox, or nil. p.mu held.
func (p *PBX) mailboxOf(exten string) *mailbox { return p.mailboxes[exten] }

func mwiDevice(box string) string { return "MWI:" + box + "@default" }

func mwiState(m *mailbox) string {
	if m.new > 0 {
		return "INUSE"
	}
	return "NOT_INUSE"
}

// toVoicemail ends the unanswered Dial of b (ring timeout: cause 0 for
// b, as the recording shows; busy: b's own cause) and runs VoiceMail for
// a's call to target.
func (c *call) toVoicemail(a, b *channel, target string, cause, tech int) (*channel, string) {
	p := c.p
	p.mu.Lock()
	status := dialStatus(cause)
	if cause == 19 && tech == 0 {
		b.cancelCli()
		cause = 0
	}
	p.emit(dialEvent(ami.EventDialEnd, a, b, "DialStatus", status))
	disp := "NO ANSWER"
	if status == "BUSY" {
		disp = "BUSY"
	}
	now := p.cfg.Now()
	a.cdrParts = append(a.cdrParts, cdrPart{destCh: b.name, data: a.appData, start: a.created, end: now, disposition: disp})
	a.cdrStart = now
	if a.context == "from-trunk" {
		a.context = p.cfg.Context
	}
	c.enterVoicemail(a, target)
	c.hangupChannel(b, cause, tech)
	p.mu.Unlock()
	return c.voicemail(a, target)
}

// enterVoicemail runs VoiceMail(<box>@default,u) on a and answers it.
// p.mu held.
func (c *call) enterVoicemail(a *channel, box string) {
	p := c.p
	a.priority = 15
	a.app, a.appData = "VoiceMail", box+"@default,u"
	a.progressed = true
	// The dialplan's Newexten of VoiceMail (the only Newexten pbxsim
	// sends): what tells a client the caller now talks to the mailbox.
	p.emit(chanEvent(ami.EventNewexten, a, "Extension", a.exten, "Application", a.app, "AppData", a.appData))
	c.answer(a, p.sdp(p.chanSeq, false))
}

// forkEnd: nobody answered a's Dial of several devices or members
// (ring timeout, every leg failed). As FreePBX does, a user's call goes
// on to the user's voicemail (macro-exten-vm after the Dial of its
// devices), a ring group's to its destination if no answer
// (Config.RingGroupVoicemail); without a mailbox the caller is hung up.
func (c *call) forkEnd(a *channel, target string, legs, ended []*forkLeg, cause int) (*channel, string) {
	p := c.p
	box := target
	if target == p.cfg.RingGroup {
		box = p.cfg.RingGroupVoicemail
	}
	if box == "" || !p.hasMailbox(box) {
		c.forkFailed(a, target, legs, ended, cause)
		return nil, ""
	}
	p.mu.Lock()
	for _, l := range legs {
		c.dropLeg(a, l, 16, "NOANSWER")
		ended = append(ended, l)
	}
	for _, l := range sortLegs(ended) {
		a.cdrParts = append(a.cdrParts, cdrPart{destCh: l.front.name, data: a.appData, start: cdrStartOf(a), end: l.ended, disposition: "NO ANSWER"})
	}
	a.cdrStart = p.cfg.Now()
	a.context, a.exten = contextMacroVM, "s"
	c.enterVoicemail(a, box)
	p.mu.Unlock()
	return c.voicemail(a, box)
}

// voicemail records a's message for target until a hangs up.
func (c *call) voicemail(a *channel, target string) (*channel, string) {
	p := c.p
	limit := time.NewTimer(vmMaxMessage)
	defer limit.Stop()
	store := func(byeA bool) (*channel, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !byeA {
			p.emit(chanEvent(ami.EventHangupRequest, a))
		}
		m := p.mailboxOf(target)
		m.new++
		p.emit(chanEvent(ami.EventMessageWaiting, a, "Mailbox", target+"@default", "Waiting", "1",
			"New", strconv.Itoa(m.new), "Old", strconv.Itoa(m.old)))
		p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
		if m.new == 1 {
			p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
				ami.Header{Key: "Device", Value: mwiDevice(target)}, ami.Header{Key: "State", Value: "INUSE"})...))
		}
		if byeA {
			c.sendBye(a, true)
		}
		p.emitCdr(a, target, nil, "VoiceMail", a.appData, "ANSWERED")
		c.hangupChannel(a, 0, 0)
		return nil, ""
	}
	for {
		select {
		case e := <-c.events:
			if e.ch != a {
				continue
			}
			switch e.kind {
			case evBye, evCancel, evNoAck:
				return store(false)
			case evHangup:
				return store(true)
			}
		case <-limit.C:
			return store(true)
		case <-c.ctx.Done():
			return store(true)
		}
	}
}

func (p *PBX) actMailboxCount(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	box := req.Get("Mailbox")
	if box == "" {
		return errResp("Mailbox not specified")
	}
	n, _, _ := strings.Cut(box, "@")
	p.mu.Lock()
	defer p.mu.Unlock()
	newN, oldN := 0, 0
	if m := p.mailboxOf(n); m != nil {
		newN, oldN = m.new, m.old
	}
	return []ami.Message{resp("Success", "Message", "Mailbox Message Count", "Mailbox", box, "UrgMessages", "0",
		"NewMessages", strconv.Itoa(newN), "OldMessages", strconv.Itoa(oldN))}
}

func (p *PBX) actMailboxStatus(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	box := req.Get("Mailbox")
	if box == "" {
		return errResp("Mailbox not specified")
	}
	n, _, _ := strings.Cut(box, "@")
	p.mu.Lock()
	defer p.mu.Unlock()
	waiting := "0"
	if m := p.mailboxOf(n); m != nil && m.new > 0 {
		waiting = "1"
	}
	return []ami.Message{resp("Success", "Message", "Mailbox Status", "Mailbox", box, "Waiting", waiting)}
}

// actVoicemailUsersList answers as app_voicemail's
// manager_list_voicemail_users: a plain acknowledgement when no mailbox is
// defined, else one VoicemailUserEntry per mailbox (its counts as
// inboxcount gives them: urgent messages counted as new).
func (p *PBX) actVoicemailUsersList(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mailboxes) == 0 {
		return []ami.Message{resp("Success", "Message", "There are no voicemail users currently defined.")}
	}
	var items []ami.Message
	for _, e := range p.sortedExts() {
		m := p.mailboxOf(e.num)
		if m == nil {
			continue
		}
		items = append(items, withLeadingID(item(ami.EventVoicemailUserEntry, "VMContext", "default", "VoiceMailbox", e.num,
			"Fullname", e.name, "Email", "(null)", "Pager", "", "ServerEmail", "asterisk", "FromString", "",
			"MailCommand", "/usr/sbin/sendmail -t", "Language", "", "TimeZone", "", "Callback", "", "Dialout", "", "UniqueID", "",
			"ExitContext", "", "SayDurationMinimum", "2", "SayEnvelope", "Yes", "SayCID", "No", "AttachMessage", "No",
			"AttachmentFormat", "", "DeleteMessage", "No", "VolumeGain", "0.00", "CanReview", "No", "CanMarkUrgent", "Yes",
			"CallOperator", "No", "MaxMessageCount", "100", "MaxMessageLength", strconv.Itoa(int(vmMaxMessage.Seconds())),
			"NewMessageCount", strconv.Itoa(m.new), "OldMessageCount", strconv.Itoa(m.old)), req))
	}
	return list(req, "Voicemail user list will follow", ami.EventVoicemailUserEntryComplete, items)
}

// mwiStates are DeviceStateList's MWI devices. p.mu held.
func (p *PBX) mwiStates() []ami.Message {
	var out []ami.Message
	for _, e := range p.sortedExts() {
		if m := p.mailboxOf(e.num); m != nil {
			out = append(out, item(ami.EventDeviceStateChange, "Device", mwiDevice(e.num), "State", mwiState(m)))
		}
	}
	return out
}

// hasMailbox reports whether exten has a voicemail box.
func (p *PBX) hasMailbox(exten string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mailboxOf(exten) != nil
}
