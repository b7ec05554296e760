package calls

// User presence as NethCTI defines it. A user chooses online, dnd,
// voicemail, cellphone or callforward (the presence); ctibridge stores the
// choice where FreePBX does (DND/<ext>, CF/<ext> on the user's main
// extension), so the phones' feature codes and the CTI agree, and reads it
// back from there. The main presence adds what the phone says when the
// choice is online: busy, ringing or offline. userPresenceUpdate announces
// changes of the presence; the phone's part comes with extenUpdate.

// Presence values.
const (
	PresenceOnline      = "online"
	PresenceDND         = "dnd"
	PresenceVoicemail   = "voicemail"
	PresenceCellphone   = "cellphone"
	PresenceCallforward = "callforward"
	PresenceBusy        = "busy"
	PresenceRinging     = "ringing"
	PresenceOffline     = "offline"
)

// PresenceChoices are the presences a user may set (GET user/presencelist).
var PresenceChoices = []string{PresenceOnline, PresenceDND, PresenceVoicemail, PresenceCellphone, PresenceCallforward}

// VoicemailTarget is the forward target that sends an extension's calls
// straight to its voicemail: FreePBX's ext-local "vmu<ext>" (unavailable
// greeting), as NethCTI writes it, so both agree on the same PBX.
func VoicemailTarget(exten string) string { return "vmu" + exten }

// toVoicemail reports whether a forward target of exten is its voicemail:
// FreePBX's vmu/vmb/vms/vmi<ext> or its direct-voicemail dial "*<ext>".
func toVoicemail(target, exten string) bool {
	if target == "*"+exten {
		return true
	}
	return len(target) == len(exten)+3 && vmPrefix(target) && target[3:] == exten
}

// PresenceOf is the presence the user whose main extension is x and
// whose cellphone number is cellphone ("" when none) chose, as read back
// from the PBX: online, dnd, voicemail, cellphone or callforward.
func PresenceOf(x *Extension, cellphone string) string {
	switch {
	case x.DND:
		return PresenceDND
	case x.CF == "":
		return PresenceOnline
	case toVoicemail(x.CF, x.Exten):
		return PresenceVoicemail
	case cellphone != "" && x.CF == cellphone:
		return PresenceCellphone
	}
	return PresenceCallforward
}

// MainPresenceOf is NethCTI's main presence: the chosen presence, or, when
// that is online, what the phone says (busy, ringing, offline, online).
func MainPresenceOf(x *Extension, cellphone string) string {
	if p := PresenceOf(x, cellphone); p != PresenceOnline {
		return p
	}
	switch x.Status {
	case "offline":
		return PresenceOffline
	case "busy", "onhold", "busy_ringing":
		return PresenceBusy
	case "ringing":
		return PresenceRinging
	}
	return PresenceOnline
}

// presenceChange appends a userPresenceUpdate when the presence chosen on
// x changed: {"exten":"201","status":"dnd"}. An extension seen for the
// first time is online unless said otherwise: no event for that. was is
// the extension x replaces as published (nil when new): the presence
// noted for it is PresenceOf(was), so when neither of what it depends on
// changed (DND and CF: the cellphones are the Config's) it is x's too.
func (e *Engine) presenceChange(ch []Change, was, x *Extension, now int64) []Change {
	if was != nil && was.DND == x.DND && was.CF == x.CF {
		return ch
	}
	p := PresenceOf(x, e.cfg.Cellphones[x.Exten])
	old, seen := e.presence[x.Exten]
	if old == p || !seen && p == PresenceOnline {
		e.presence[x.Exten] = p
		return ch
	}
	e.presence[x.Exten] = p
	return append(ch, valueChange(UserPresenceUpdate, x.Exten, Presence{Exten: x.Exten, Status: p}, now, "", appendPresence))
}
