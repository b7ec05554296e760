package auth

import (
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
	ManageUsers               // manage users (endpoint ignored)
	Conference                // manage the ConfBridge room named by the endpoint (its own conference): add, mute, kick, lock, end
)

var actionNames = [...]string{
	SeeCalls: "see_calls", Call: "call", Hangup: "hangup", Transfer: "transfer", Park: "park",
	Pickup: "pickup", PickupParking: "pickup_parking", Record: "record", Spy: "spy", Intrude: "intrude",
	SetDND: "dnd", SetCallForward: "call_forward", QueueMembership: "queue_member",
	SwitchboardHistory: "switchboard_history", ManageUsers: "manage_users", Conference: "conference",
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

// Allowed is the one place that decides whether u may do a to endpoint
// (docs/design.md "Users and permissions"):
//
//   - admin: everything.
//   - everyone sees every endpoint's presence (not asked here).
//   - SeeCalls: an endpoint in the user's scope (its own; for an operator
//     also every endpoint of its groups); any endpoint with the
//     operator_panel permission. For calls no extension owns (endpoint ""):
//     operators and operator_panel holders.
//   - acting: only on endpoints in the user's scope; a `user` additionally
//     needs operator_panel to take parked calls (it cannot see who they
//     are without it).
//   - SwitchboardHistory: admin, or the switchboard_history permission.
//   - ManageUsers: admin only.
//
// A nil user may do nothing.
func Allowed(u *User, a Action, endpoint string) bool {
	if u == nil {
		return false
	}
	if u.Role == RoleAdmin {
		return true
	}
	switch a {
	case SeeCalls:
		if u.perms[PermOperatorPanel] {
			return true
		}
		if endpoint == "" {
			return u.Role == RoleOperator
		}
		return u.scope[endpoint]
	case SwitchboardHistory:
		return u.perms[PermSwitchboardHistory]
	case ManageUsers:
		return false
	case Call, Hangup, Transfer, Park, Pickup, Record, Spy, Intrude, SetDND, SetCallForward, QueueMembership, Conference:
		return endpoint != "" && u.scope[endpoint]
	case PickupParking:
		if u.Role == RoleUser && !u.perms[PermOperatorPanel] {
			return false
		}
		return endpoint != "" && u.scope[endpoint]
	}
	return false
}

// viewKey names what u sees of the live state; users with the same key see
// the same bytes, so filtered encodings are cached per (version, key). ""
// means everything, unfiltered.
func viewKey(u *User) string {
	if u.Role == RoleAdmin || u.perms[PermOperatorPanel] {
		return ""
	}
	scope := make([]string, 0, len(u.scope))
	for e := range u.scope {
		scope = append(scope, e)
	}
	slices.Sort(scope)
	prefix := "u:"
	if u.Role == RoleOperator {
		prefix = "o:" // also sees calls no extension owns
	}
	return prefix + strings.Join(scope, ",")
}

// ViewKey names what the user sees: "" for everything (admin, or the
// operator_panel permission); otherwise users with equal keys see exactly
// the same filtered state.
func (u *User) ViewKey() string { return u.viewKey }
