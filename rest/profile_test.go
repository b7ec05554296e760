package rest

import (
	"fmt"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
)

// routeNeeds says which capabilities let a user act through an action
// route on an endpoint in its scope (own) or outside it: the route is
// allowed when the user holds any one of the list.
func routeNeeds(route string, own bool) []auth.Capability {
	scoped := func(c auth.Capability) []auth.Capability {
		if own {
			return []auth.Capability{c}
		}
		return nil
	}
	ownAny := func(o, a auth.Capability) []auth.Capability { return append(scoped(o), a) }
	switch route {
	case "call":
		return scoped(auth.CapCall)
	case "hangup":
		return ownAny(auth.CapHangupOwn, auth.CapHangupAny)
	case "blindtransfer", "atxfer":
		return scoped(auth.CapTransfer)
	case "park":
		return scoped(auth.CapPark)
	case "pickup_conv":
		return scoped(auth.CapPickup)
	case "pickup_parking":
		return nil // needs pickup and see_unowned (or operator_panel): never one capability alone
	case "start_record", "stop_record", "mute_record", "unmute_record":
		return ownAny(auth.CapRecordOwn, auth.CapRecordAny)
	case "start_spy":
		return scoped(auth.CapSpy)
	case "intrude", "whisper":
		return scoped(auth.CapIntrude)
	case "dnd":
		return ownAny(auth.CapDNDOwn, auth.CapDNDAny)
	case "cfcall":
		return ownAny(auth.CapForwardOwn, auth.CapForwardAny)
	case "queuemember_add", "queuemember_remove", "queuemember_pause", "queuemember_unpause":
		return ownAny(auth.CapQueueAgent, auth.CapQueueManager)
	}
	panic("routeNeeds: unknown route " + route)
}

// TestCapabilityRouteTable: every capability x every action route, on the
// user's own endpoint and on another: a user whose profile holds that one
// capability is refused (403, nothing sent to the PBX) exactly where
// routeNeeds says so; admin is allowed everywhere.
func TestCapabilityRouteTable(t *testing.T) {
	h := testHash()
	var list []auth.User
	profiles := auth.DefaultProfiles()
	for _, c := range auth.AllCapabilities() {
		profiles["only_"+c.String()] = auth.CapsOf(c)
		list = append(list, auth.User{Username: "u_" + c.String(), PasswordHash: h, Profile: "only_" + c.String(), Endpoints: []string{"2000"}})
	}
	us, err := auth.NewUsersWithProfiles(list, profiles)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, true, func(c *Config) {
		c.Auth = auth.NewService(us, auth.Config{})
	})
	for _, c := range auth.AllCapabilities() {
		tok, _, err := f.svc.Tokens().Issue("u_" + c.String())
		if err != nil {
			t.Fatal(err)
		}
		f.tokens["u_"+c.String()] = tok
	}
	bodies := actionBodies()
	for _, a := range actions {
		for _, c := range auth.AllCapabilities() {
			for _, own := range []bool{true, false} {
				ep := "2000"
				if !own {
					ep = "2002"
				}
				dest := "2000"
				if a.name == "pickup_parking" {
					dest = ep
				}
				want := c == auth.CapAdmin
				for _, need := range routeNeeds(a.name, own) {
					want = want || need == c
				}
				t.Run(fmt.Sprintf("%s/%s/own=%v", a.name, c, own), func(t *testing.T) {
					before := len(f.sent())
					r := f.do("POST", "/astproxy/"+a.name, "u_"+c.String(), bodies[a.name](ep, dest))
					switch {
					case !want && r.status != 403:
						t.Errorf("got %d %s, want 403", r.status, r.body)
					case !want && len(f.sent()) != before:
						t.Errorf("%d actions reached the PBX after a 403", len(f.sent())-before)
					case want && r.status == 403:
						t.Errorf("got 403 %s", r.body)
					}
				})
			}
		}
	}
	// The conference routes: one's own room needs "conference".
	for _, c := range auth.AllCapabilities() {
		want := 403
		if c == auth.CapConference || c == auth.CapAdmin {
			want = 200
		}
		t.Run("start_conf/"+c.String(), func(t *testing.T) {
			f.post(t, "start_conf", "u_"+c.String(), `{"addEndpointId":"2001"}`, want)
		})
	}
}

// TestHistoryAndPhonebookCapabilities: reading one's own history needs
// history_personal, another's history_group (sharing a group) or
// history_switchboard; writing public contacts needs phonebook_write.
func TestHistoryAndPhonebookCapabilities(t *testing.T) {
	hash := testHash()
	profiles := auth.DefaultProfiles()
	profiles["none"] = 0
	profiles["group"] = auth.CapsOf(auth.CapHistoryGroup)
	profiles["writer"] = auth.CapsOf(auth.CapPhonebookWrite)
	us, err := auth.NewUsersWithProfiles([]auth.User{
		{Username: "nobody", PasswordHash: hash, Profile: "none", Groups: []string{"sales"}},
		{Username: "gina", PasswordHash: hash, Profile: "group", Groups: []string{"sales"}},
		{Username: "sam", PasswordHash: hash, Groups: []string{"sales"}},
		{Username: "zed", PasswordHash: hash, Groups: []string{"support"}},
		{Username: "wendy", PasswordHash: hash, Profile: "writer"},
		{Username: "root", PasswordHash: hash, Role: auth.RoleAdmin},
	}, profiles)
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{auth: auth.NewService(us, auth.Config{})}
	get := func(n string) *auth.User { u, _ := us.Lookup(n); return u }
	for _, c := range []struct {
		who, whose string
		ok         bool
	}{
		{"nobody", "nobody", false}, // no history_personal
		{"sam", "sam", true},        // the user profile has it
		{"sam", "gina", false},      // no history_group
		{"gina", "sam", true},       // same group
		{"gina", "zed", false},      // another group
		{"gina", "gina", false},     // group only, not personal
		{"root", "zed", true},       // switchboard
	} {
		_, err := h.historyOf(get(c.who), c.whose)
		if (err == nil) != c.ok {
			t.Errorf("%s reads %s's history: %v, want ok=%v", c.who, c.whose, err, c.ok)
		}
	}
	for name, want := range map[string]bool{"sam": false, "wendy": true, "root": true} {
		if got := actor(get(name)).Admin; got != want {
			t.Errorf("%s writes public contacts: %v, want %v", name, got, want)
		}
	}
}
