package nethcti

import "github.com/ctibridge/ctibridge/auth"

// NethCTI's profile: macro permissions, each on or off with permissions
// inside, which the web app reads to show its views and buttons. They are
// mapped from the user's ctibridge capabilities (auth.Caps); the map is
// the only place the two vocabularies meet.

type permJSON struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Value bool   `json:"value"`
}

type macroJSON struct {
	Value       bool                `json:"value"`
	Permissions map[string]permJSON `json:"permissions"`
}

type profileJSON struct {
	ID               string               `json:"id"`
	Name             string               `json:"name"`
	MacroPermissions map[string]macroJSON `json:"macro_permissions"`
}

// perm is one permission of a macro permission, on when the user has any
// of caps (none: always on).
type perm struct {
	name string
	caps []auth.Capability
	not  bool // on when the user has none of caps (NethCTI's privacy)
}

// macros are NethCTI's macro permissions the clients read (the web app's
// nav, operators, queues, phonebook, history and settings views) and the
// capabilities that grant them.
var macros = []struct {
	name  string
	caps  []auth.Capability // the macro is on when any is held; none: always
	perms []perm
}{
	{"nethvoice_cti", nil, []perm{{name: "privacy", caps: []auth.Capability{auth.CapSeeNumbers}, not: true}}},
	{"settings", nil, []perm{
		{name: "dnd", caps: []auth.Capability{auth.CapDNDOwn, auth.CapDNDAny}},
		{name: "call_forward", caps: []auth.Capability{auth.CapForwardOwn, auth.CapForwardAny}},
		{name: "pickup", caps: []auth.Capability{auth.CapPickup}},
		{name: "spy", caps: []auth.Capability{auth.CapSpy}},
		{name: "intrude", caps: []auth.Capability{auth.CapIntrude}},
		{name: "recording", caps: []auth.Capability{auth.CapRecordOwn, auth.CapRecordAny}},
		{name: "parkings", caps: []auth.Capability{auth.CapSeeUnowned, auth.CapOperatorPanel}},
		{name: "video_conference", caps: []auth.Capability{auth.CapConference}},
	}},
	{"presence_panel", nil, []perm{
		{name: "hangup", caps: []auth.Capability{auth.CapHangupAny}},
		{name: "ad_recording", caps: []auth.Capability{auth.CapRecordAny}},
		{name: "transfer", caps: []auth.Capability{auth.CapTransfer}},
		{name: "pickup", caps: []auth.Capability{auth.CapPickup}},
		{name: "spy", caps: []auth.Capability{auth.CapSpy}},
		{name: "intrude", caps: []auth.Capability{auth.CapIntrude}},
	}},
	{"operator_panel", []auth.Capability{auth.CapOperatorPanel}, nil},
	{"queue_agent", []auth.Capability{auth.CapQueueAgent, auth.CapQueueManager},
		[]perm{{name: "ad_queue_agent", caps: []auth.Capability{auth.CapQueueManager}}}},
	{"qmanager", []auth.Capability{auth.CapQueueManager}, nil},
	{"phonebook", nil, []perm{{name: "ad_phonebook", caps: []auth.Capability{auth.CapPhonebookWrite}}}},
	{"cdr", []auth.Capability{auth.CapHistoryPersonal, auth.CapHistoryGroup, auth.CapHistorySwitchboard}, []perm{
		{name: "ad_cdr", caps: []auth.Capability{auth.CapHistorySwitchboard}},
		{name: "group_cdr", caps: []auth.Capability{auth.CapHistoryGroup}},
	}},
	{"trunks", []auth.Capability{auth.CapSeeUnowned, auth.CapOperatorPanel}, nil},
	// Served by other ctibridge routes, or not at all: off, so the app
	// hides them rather than failing.
	{"customer_card", []auth.Capability{}, nil},
	{"streaming", []auth.Capability{}, nil},
	{"off_hour", []auth.Capability{}, nil},
}

func hasAny(c auth.Caps, cs []auth.Capability) bool {
	if cs == nil {
		return true
	}
	for _, x := range cs {
		if c.Has(x) {
			return true
		}
	}
	return false
}

// profileOf is u's NethCTI profile.
func profileOf(u *auth.User) profileJSON {
	c := u.Caps()
	p := profileJSON{ID: profileName(u), Name: profileName(u), MacroPermissions: map[string]macroJSON{}}
	for _, m := range macros {
		mj := macroJSON{Value: hasAny(c, m.caps), Permissions: map[string]permJSON{}}
		for _, pm := range m.perms {
			on := hasAny(c, pm.caps)
			if pm.not {
				on = !on
			}
			mj.Permissions[pm.name] = permJSON{ID: pm.name, Name: pm.name, Value: on && mj.Value}
		}
		p.MacroPermissions[m.name] = mj
	}
	return p
}
