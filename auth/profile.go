package auth

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Capability is one thing a profile may grant (NethCTI's profile
// permissions). Allowed turns them into answers.
type Capability uint8

const (
	CapCall               Capability = iota // originate calls from its endpoints
	CapHangupOwn                            // hang up calls of endpoints in its scope
	CapHangupAny                            // hang up any endpoint's calls
	CapTransfer                             // blind and attended transfer (scope)
	CapPark                                 // park calls (scope)
	CapPickup                               // pick up ringing calls (scope); parked ones also need CapSeeUnowned or CapOperatorPanel
	CapSpy                                  // listen to calls (scope)
	CapIntrude                              // whisper into / barge in calls (scope)
	CapRecordOwn                            // record calls of its scope
	CapRecordAny                            // record any endpoint's calls
	CapDNDOwn                               // set do-not-disturb of its scope
	CapDNDAny                               // set anyone's do-not-disturb
	CapForwardOwn                           // set call forwarding of its scope
	CapForwardAny                           // set anyone's call forwarding
	CapQueueAgent                           // log its scope in and out of queues, pause
	CapQueueManager                         // the same for any endpoint
	CapPhonebookWrite                       // write public phonebook contacts
	CapHistoryPersonal                      // read its own call history
	CapHistoryGroup                         // read the call history of users sharing a group
	CapHistorySwitchboard                   // read the whole switchboard's history
	CapSeeNumbers                           // see numbers and names in the calls of its scope (privacy when off)
	CapSeeUnowned                           // see calls no extension owns: trunks, queue waiters, parked callers
	CapGroupScope                           // its scope includes the endpoints of users sharing a group
	CapOperatorPanel                        // see the numbers and names of every call
	CapConference                           // manage its own ConfBridge room (scope): add, mute, kick, lock, end
	CapAdmin                                // everything, users and sessions included
	numCaps
)

var capNames = [numCaps]string{
	CapCall: "call", CapHangupOwn: "hangup_own", CapHangupAny: "hangup_any", CapTransfer: "transfer",
	CapPark: "park", CapPickup: "pickup", CapSpy: "spy", CapIntrude: "intrude",
	CapRecordOwn: "record_own", CapRecordAny: "record_any", CapDNDOwn: "dnd_own", CapDNDAny: "dnd_any",
	CapForwardOwn: "forward_own", CapForwardAny: "forward_any", CapQueueAgent: "queue_agent",
	CapQueueManager: "queue_manager", CapPhonebookWrite: "phonebook_write", CapHistoryPersonal: "history_personal",
	CapHistoryGroup: "history_group", CapHistorySwitchboard: "history_switchboard", CapSeeNumbers: "see_numbers",
	CapSeeUnowned: "see_unowned", CapGroupScope: "group_scope", CapOperatorPanel: "operator_panel", CapConference: "conference", CapAdmin: "admin",
}

func (c Capability) String() string {
	if c < numCaps {
		return capNames[c]
	}
	return "unknown"
}

// Caps is a set of capabilities.
type Caps uint32

// CapsOf returns the set of cs.
func CapsOf(cs ...Capability) Caps {
	var s Caps
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

// Has reports whether c is in the set.
func (s Caps) Has(c Capability) bool { return s&(1<<c) != 0 }

// Names lists the set's capability names in declaration order.
func (s Caps) Names() []string {
	out := []string{}
	for c := range numCaps {
		if s.Has(c) {
			out = append(out, c.String())
		}
	}
	return out
}

// AllCapabilities lists every capability, for tables and docs.
func AllCapabilities() []Capability {
	out := make([]Capability, 0, numCaps)
	for c := range numCaps {
		out = append(out, c)
	}
	return out
}

// ParseCapability maps a name to its capability.
func ParseCapability(s string) (Capability, bool) {
	i := slices.Index(capNames[:], s)
	return Capability(i), i >= 0
}

// The default profiles: one per role, so users files without profiles
// keep their meaning.
var (
	userCaps = CapsOf(CapCall, CapHangupOwn, CapTransfer, CapPark, CapPickup, CapSpy, CapIntrude, CapRecordOwn,
		CapDNDOwn, CapForwardOwn, CapQueueAgent, CapHistoryPersonal, CapSeeNumbers, CapConference)
	operatorCaps = userCaps | CapsOf(CapGroupScope, CapSeeUnowned)
	adminCaps    = Caps(1<<numCaps - 1)
)

// DefaultProfiles are the profiles every users file has: "user",
// "operator" and "admin", the capabilities of the roles of the same name.
// A users file may redefine them.
func DefaultProfiles() map[string]Caps {
	return map[string]Caps{"user": userCaps, "operator": operatorCaps, "admin": adminCaps}
}

// permissionCaps are the capabilities the users file's extra permissions
// add to a user's profile.
var permissionCaps = map[string]Caps{
	PermOperatorPanel:      CapsOf(CapOperatorPanel),
	PermSwitchboardHistory: CapsOf(CapHistorySwitchboard),
}

// roleOf is the role a profile's capabilities amount to (for what still
// asks for a role: the JSON's "role", the phonebook's admin).
func roleOf(c Caps) Role {
	switch {
	case c.Has(CapAdmin):
		return RoleAdmin
	case c.Has(CapGroupScope):
		return RoleOperator
	}
	return RoleUser
}

// parseProfiles reads the users file's "profiles:" mapping: name → list
// of capability names. The defaults are added for names it does not give.
func parseProfiles(file string, v *yaml.Node) (map[string]Caps, error) {
	out := DefaultProfiles()
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return out, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, &UsersError{File: file, Line: v.Line, Key: "profiles", Msg: "want a mapping of profile name to a list of capabilities"}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, l := v.Content[i], v.Content[i+1]
		fail := func(line int, format string, args ...any) error {
			return &UsersError{File: file, Line: line, Key: "profiles", Msg: fmt.Sprintf("profile %q: ", k.Value) + fmt.Sprintf(format, args...)}
		}
		if err := checkName(k.Value); err != nil {
			return nil, fail(k.Line, "%v", err)
		}
		if seen[k.Value] {
			return nil, fail(k.Line, "given twice")
		}
		seen[k.Value] = true
		names, err := stringList(l)
		if err != nil {
			return nil, fail(l.Line, "%v", err)
		}
		var c Caps
		for _, n := range names {
			cp, ok := ParseCapability(n)
			if !ok {
				return nil, fail(l.Line, "unknown capability %q (known: %s)", n, strings.Join(capNames[:], ", "))
			}
			c |= CapsOf(cp)
		}
		out[k.Value] = c
	}
	return out, nil
}

// ProfileNames lists the names of profiles, sorted.
func ProfileNames(profiles map[string]Caps) []string {
	return slices.Sorted(maps.Keys(profiles))
}
