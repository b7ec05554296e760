package pbxsim

import (
	"github.com/ctibridge/ctibridge/ami"
)

// Dialplan recording on the freepbx plan, as the third set's dialplan
// runs FreePBX's sub-record-check (recording_dialplan, EVENTS.md of that
// set): before a call to a user is dialled (macro-exten-vm) or leaves on
// the outbound route, the AstDB's policies decide;
// AMPUSER/<callee>/recording/in/internal or
// AMPUSER/<caller>/recording/out/internal (out/external for the route)
// at "always" start MixMonitor on the caller's channel (MixMonitorStart,
// the channel block only, in sub-record-check's recordcall) and set
// CDR(recordingfile) to <kind>-<number>-<caller>-<YYYYMMDD-HHMMSS>-
// <uniqueid>.wav: the caller's Cdrs carry it as RecordingFile (every
// Cdr of the plan has the header, cdr_manager's mapping). Ring groups and
// queues record nothing (their checks return at once there too). No
// audio is written.

const recordingFormat = "wav"

// recordCheck runs sub-record-check for a's call to number: kind
// "internal" (a user) or "out" (the outbound route). p.mu held.
func (c *call) recordCheck(a *channel, kind, number string) {
	p := c.p
	if !p.freepbx() || a.recFile != "" {
		return
	}
	from := a.endpoint // FROMEXTEN: the calling user
	if e := p.exts[a.endpoint]; e != nil && e.user != "" {
		from = e.user // a device calls as its user
	}
	policy := func(k string) bool {
		p.feat.mu.Lock() // after p.mu, holding nothing else
		defer p.feat.mu.Unlock()
		return p.feat.db["AMPUSER/"+k] == "always"
	}
	switch kind {
	case "internal":
		if !policy(number+"/recording/in/internal") && !policy(from+"/recording/out/internal") {
			return
		}
	case "out":
		if !policy(from + "/recording/out/external") {
			return
		}
	default:
		return
	}
	a.recFile = kind + "-" + number + "-" + from + "-" + p.cfg.Now().Format("20060102-150405") + "-" + a.uniqueid + "." + recordingFormat
	ctx, exten, prio := a.context, a.exten, a.priority
	a.context, a.exten, a.priority = "sub-record-check", "recordcall", 3
	p.emit(chanEvent(ami.EventMixMonitorStart, a))
	a.context, a.exten, a.priority = ctx, exten, prio
}
