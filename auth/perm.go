package auth

import (
	"iter"
	"slices"
	"strings"
)

// Action is something a user may be allowed to do to an endpoint.
type Action uint8

const (
	// SeeCalls: see the numbers and names in the endpoint's calls. Every
	// user sees every endpoint's presence; this is about call details. With
	// endpoint "" it asks about calls no extension owns: trunk
	// conversations, callers waiting in queues, parked callers.
	SeeCalls           Action = iota + 1
	Call                      // originate a call from the endpoint
	Hangup                    // hang up one of the endpoint's conversations
	Transfer                  // blind or attended transfer of the endpoint's conversation
	Park                      // park the endpoint's conversation
	Pickup                    // pick up a call: asked for the ringing endpoint and for the one that picks it up
	PickupParking             // take a parked call to the endpoint
	Record                    // start, stop, mute or unmute recording of the endpoint's conversation
	Spy                       // listen to the endpoint's conversation (asked for the spied and the listening endpoint)
	Intrude                   // whisper into / join the endpoint's conversation (both endpoints, as Spy)
	SetDND                    // change the endpoint's do-not-disturb
	SetCallForward            // change the endpoint's call forwarding
	QueueMembership           // add, remove, pause or unpause the endpoint as a queue member
	SwitchboardHistory        // read the whole switchboard's call history (endpoint ignored)
	ManageUsers               // manage users and everyone's sessions (endpoint ignored)
	Conference                // manage the ConfBridge room named by the endpoint (its own conference): add, mute, kick, lock, end
	PersonalHistory           // read one's own call history (endpoint ignored)
	GroupHistory              // read the history of a user sharing a group (endpoint ignored; the caller checks the group)
	PhonebookWrite            // write public phonebook contacts (endpoint ignored)
)

var actionNames = [...]string{
	SeeCalls: "see_calls", Call: "call", Hangup: "hangup", Transfer: "transfer", Park: "park",
	Pickup: "pickup", PickupParking: "pickup_parking", Record: "record", Spy: "spy", Intrude: "intrude",
	SetDND: "dnd", SetCallForward: "call_forward", QueueMembership: "queue_member",
	SwitchboardHistory: "switchboard_history", ManageUsers: "manage_users", Conference: "conference",
	PersonalHistory: "personal_history", GroupHistory: "group_history", PhonebookWrite: "phonebook_write",
}

func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return "unknown"
}

// Actions lists every Action, for tables and /user/me.
func Actions() []Action {
	out := make([]Action, 0, len(actionNames))
	for a := SeeCalls; int(a) < len(actionNames); a++ {
		out = append(out, a)
	}
	return out
}

// scoped is the rule of an action on an endpoint: allowed anywhere with
// the "any" capability, in the user's scope with the "own" one.
func scoped(u *User, endpoint string, own, any Capability) bool {
	if u.caps.Has(any) {
		return true
	}
	return u.caps.Has(own) && endpoint != "" && u.scope[endpoint]
}

// actionCaps maps the actions that only need one capability in scope.
var actionCaps = [...]Capability{
	Call: CapCall, Transfer: CapTransfer, Park: CapPark, Pickup: CapPickup, Spy: CapSpy, Intrude: CapIntrude,
	Conference: CapConference,
}

// Allowed is the one place that decides whether u may do a to endpoint
// (docs/design.md "Users and permissions"), from the user's capabilities
// (its profile, see profile.go) and scope (its endpoints, plus with
// CapGroupScope those of users sharing a group):
//
//   - CapAdmin: everything.
//   - everyone sees every endpoint's presence (not asked here).
//   - SeeCalls: any endpoint with CapOperatorPanel; one in scope with
//     CapSeeNumbers. For calls no extension owns (endpoint ""):
//     CapSeeUnowned or CapOperatorPanel.
//   - Call, Transfer, Park, Pickup, Spy, Intrude, Conference: the
//     capability of that name, on an endpoint in scope.
//   - Hangup, Record, SetDND, SetCallForward: *_any anywhere, *_own in
//     scope. QueueMembership: CapQueueManager anywhere, CapQueueAgent in
//     scope.
//   - PickupParking: CapPickup in scope, and seeing who is parked
//     (CapSeeUnowned or CapOperatorPanel).
//   - SwitchboardHistory, PersonalHistory, GroupHistory, PhonebookWrite:
//     the capability of that name. ManageUsers: CapAdmin only.
//
// A nil user may do nothing. It does not allocate.
func Allowed(u *User, a Action, endpoint string) bool {
	if u == nil {
		return false
	}
	c := u.caps
	if c.Has(CapAdmin) {
		return true
	}
	switch a {
	case SeeCalls:
		if c.Has(CapOperatorPanel) {
			return true
		}
		if endpoint == "" {
			return c.Has(CapSeeUnowned)
		}
		return c.Has(CapSeeNumbers) && u.scope[endpoint]
	case Call, Transfer, Park, Pickup, Spy, Intrude, Conference:
		return c.Has(actionCaps[a]) && endpoint != "" && u.scope[endpoint]
	case Hangup:
		return scoped(u, endpoint, CapHangupOwn, CapHangupAny)
	case Record:
		return scoped(u, endpoint, CapRecordOwn, CapRecordAny)
	case SetDND:
		return scoped(u, endpoint, CapDNDOwn, CapDNDAny)
	case SetCallForward:
		return scoped(u, endpoint, CapForwardOwn, CapForwardAny)
	case QueueMembership:
		return scoped(u, endpoint, CapQueueAgent, CapQueueManager)
	case PickupParking:
		return (c.Has(CapSeeUnowned) || c.Has(CapOperatorPanel)) && c.Has(CapPickup) && endpoint != "" && u.scope[endpoint]
	case SwitchboardHistory:
		return c.Has(CapHistorySwitchboard)
	case PersonalHistory:
		return c.Has(CapHistoryPersonal)
	case GroupHistory:
		return c.Has(CapHistoryGroup)
	case PhonebookWrite:
		return c.Has(CapPhonebookWrite)
	case ManageUsers:
		return false
	}
	return false
}

// viewKey names what u sees of the live state; users with the same key see
// the same bytes, so filtered encodings are cached per (version, key). ""
// means everything, unfiltered.
func viewKey(u *User) string {
	if u.caps.Has(CapAdmin) || u.caps.Has(CapOperatorPanel) {
		return ""
	}
	prefix := "u:"
	if u.caps.Has(CapSeeUnowned) {
		prefix = "o:" // also sees calls no extension owns
	}
	if !u.caps.Has(CapSeeNumbers) {
		return "p" + prefix // privacy: no numbers in any endpoint's calls
	}
	scope := make([]string, 0, len(u.scope))
	for e := range u.scope {
		scope = append(scope, e)
	}
	slices.Sort(scope)
	return prefix + strings.Join(scope, ",")
}

// ViewKey names what the user sees: "" for everything (admin, or the
// operator_panel permission); otherwise users with equal keys see exactly
// the same filtered state.
func (u *User) ViewKey() string { return u.viewKey }

// SeesConference reports whether u may see conference room, whose members
// are on the extensions members yields: who sees calls no extension owns,
// who may see the calls of the extension the room is named by, or of one
// of its members; never a room of a PBX the user is not limited to
// (User.PBXs). REST (from the model) and the WebSocket (from a change's
// JSON) decide with it.
func SeesConference(u *User, room string, members iter.Seq[string]) bool {
	if !u.SeesID(room) {
		return false // a PBX the user is not limited to (User.PBXs)
	}
	if Allowed(u, SeeCalls, "") || Allowed(u, SeeCalls, room) {
		return true
	}
	for x := range members {
		if x != "" && Allowed(u, SeeCalls, x) {
			return true
		}
	}
	return false
}
