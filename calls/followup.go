package calls

import (
	"errors"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Follow-ups are the actions the engine asks its link owner to send besides
// the fixed resync lists: actions that depend on what a list answered
// (PJSIPShowEndpoint for each endpoint PJSIPShowEndpoints listed), actions
// that read what the PBX raises no event for (AstDB), and refreshes. The
// engine stays pure: it only says which actions it wants (Followups) and
// learns from their answers (ApplyAnswer); the link sends them.
//
// A feature contributes follow-ups by adding a followupFeature to
// followupFeatures (its resync and refresh lists), by calling e.ask from
// an event handler, and, when the default handling of answers (apply every
// list item through Apply) is not enough, by adding an answer handler to
// answerHandlers.

// FollowupKind says why the link asks for follow-ups.
type FollowupKind uint8

const (
	// FollowResync: the resync lists have just been applied; the answers
	// are applied before EndResync, so the first live snapshot has them.
	FollowResync FollowupKind = iota
	// FollowRefresh: the periodic refresh of what raises no AMI event.
	FollowRefresh
	// FollowPending: only what events asked for since the last call.
	FollowPending
)

// followupFeature is one feature's contribution to resyncs and refreshes.
type followupFeature struct {
	name    string
	resync  func(e *Engine) []ami.Message // nil: none
	refresh func(e *Engine) []ami.Message // nil: none
}

// followupFeatures lists the features that want follow-ups, in the order
// their actions are sent.
var followupFeatures = []followupFeature{
	{name: "parking lots", resync: parkingLotFollowups},
	{name: "astdb", resync: astdbResyncFollowups, refresh: astdbRefreshFollowups},
	{name: "voicemail", resync: voicemailResyncFollowups},
	{name: "endpoints", refresh: endpointRefreshFollowups},
	{name: "conferences", refresh: confRefreshFollowups},
}

// answerHandler learns from the answer to a follow-up action after its
// list items (if any) went through Apply. err is the action's error
// (*ami.ActionError when the PBX refused it), nil on success.
type answerHandler func(e *Engine, action ami.Message, resp ami.Response, err error)

// answerHandlers by action name; actions without one only have their
// items applied.
var answerHandlers = map[string]answerHandler{
	ami.ActionDBGet:              onDBGetAnswer,
	ami.ActionDBGetTree:          onDBGetTreeAnswer,
	ami.ActionMailboxCount:       onMailboxCountAnswer,
	ami.ActionVoicemailUsersList: onVoicemailUsersListAnswer,
}

// followState is the engine's bookkeeping of follow-ups.
type followState struct {
	pending []ami.Message
	keys    map[string]struct{} // of pending, for de-duplication
	missing map[string]bool     // actions the PBX refused since the last BeginResync
	logged  map[string]bool     // actions whose absence was logged once
	refresh uint64              // FollowRefresh calls so far

	// An answer is applied when the link has collected it, possibly
	// after live events that followed it on the wire. sent is the
	// resyncState.events count when each action was handed out (the
	// oldest, when handed out again before its answer came); while
	// answering, staleItem judges the answer's items against it.
	sent      map[string]sentMark
	answering bool
	mark      uint64
}

// sentMark is when an action was handed out, and how many answers to it
// are still due.
type sentMark struct {
	at uint64
	n  int
}

// maxSent bounds the handed-out actions remembered; past it (answers that
// never came) the marks are forgotten: an answer with no mark never
// overrides what a live event set.
const maxSent = 2 * maxPending

// namesEvery: one periodic refresh in this many re-reads the names too
// (every endpoint's details, AMPUSER): five minutes at the link's default
// 30 s. Names change rarely; forwards and DND at any time.
const namesEvery = 10

// namesDue reports whether the running refresh re-reads the names.
func (e *Engine) namesDue() bool { return e.follow.refresh%namesEvery == 0 }

// maxPending bounds the actions events may queue between two Followups.
const maxPending = 4096

// ask queues a follow-up action unless an equal one is queued already.
func (e *Engine) ask(m ami.Message) {
	f := &e.follow
	if f.missing[m.Action()] || len(f.pending) >= maxPending {
		return
	}
	k := m.String()
	if _, ok := f.keys[k]; ok {
		return
	}
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	f.keys[k] = struct{}{}
	f.pending = append(f.pending, m)
}

func (e *Engine) followups(k FollowupKind) []ami.Message {
	var out []ami.Message
	if k == FollowRefresh {
		e.follow.refresh++
	}
	if k != FollowPending {
		for _, f := range followupFeatures {
			get := f.resync
			if k == FollowRefresh {
				get = f.refresh
			}
			if get == nil {
				continue
			}
			for _, m := range get(e) {
				if !e.follow.missing[m.Action()] {
					out = append(out, m)
				}
			}
		}
	}
	out = append(out, e.follow.pending...)
	e.follow.pending = nil
	clear(e.follow.keys)
	e.markSent(out)
	return out
}

// markSent remembers when actions were handed out (followState.sent).
func (e *Engine) markSent(out []ami.Message) {
	f := &e.follow
	if f.sent == nil {
		f.sent = map[string]sentMark{}
	}
	for _, m := range out {
		if len(f.sent) >= maxSent {
			clear(f.sent)
		}
		k := m.String()
		s, ok := f.sent[k]
		if !ok {
			s.at = e.resync.events
		}
		s.n++
		f.sent[k] = s
	}
}

// sentAt is when action was handed out, forgetting one answer due to it;
// 0 (older than any live event) when it was not handed out.
func (e *Engine) sentAt(action ami.Message) uint64 {
	f := &e.follow
	k := action.String()
	s, ok := f.sent[k]
	if !ok {
		return 0
	}
	if s.n--; s.n <= 0 {
		delete(f.sent, k)
	} else {
		f.sent[k] = s
	}
	return s.at
}

func (e *Engine) applyAnswer(action ami.Message, resp ami.Response, err error) {
	e.follow.answering, e.follow.mark = true, e.sentAt(action)
	for _, it := range resp.Items {
		e.apply(it)
	}
	name := action.Action()
	var ae *ami.ActionError
	if errors.As(err, &ae) && refused(ae.Message) {
		e.markMissing(name, ae.Message)
	}
	if h := answerHandlers[name]; h != nil {
		h(e, action, resp, err)
	}
	e.follow.answering = false
}

// refused reports whether an action error means the PBX does not offer
// the action at all (module not loaded, older Asterisk), not that this
// one call failed.
func refused(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "invalid/unknown command") || strings.Contains(msg, "permission denied")
}

// markMissing remembers that the PBX lacks an action until the next
// resync, logging it once per engine.
func (e *Engine) markMissing(name, why string) {
	f := &e.follow
	if f.missing == nil {
		f.missing, f.logged = map[string]bool{}, map[string]bool{}
	}
	f.missing[name] = true
	if !f.logged[name] {
		f.logged[name] = true
		e.log.Warn("the PBX does not offer this action: what it reads is not shown", "action", name, "pbx_says", why, "effect", missingEffect[name])
	}
}

// missingEffect is what a user sees when the PBX lacks an action.
var missingEffect = map[string]string{
	ami.ActionDBGetTree:          "call forwarding and DND are read key by key with DBGet",
	ami.ActionDBGet:              "call forwarding, DND and AstDB names are not shown",
	ami.ActionVoicemailUsersList: "voicemail counters are read with MailboxCount, only for the mailboxes an MWI device or an endpoint names",
	ami.ActionMailboxCount:       "voicemail counters come from MessageWaiting events only",
	ami.ActionPJSIPShowEndpoint:  "extension names come from the users file and calls only",
	ami.ActionParkinglots:        "parking spaces appear when a call is parked",
}

// Missing reports whether the PBX refused action since the last resync.
func (e *Engine) missing(action string) bool { return e.follow.missing[action] }

// resetMissing forgets refused actions at a new connection: the PBX may
// have been upgraded or a module loaded.
func (e *Engine) resetMissing() { clear(e.follow.missing) }
