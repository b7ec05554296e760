package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// A follow-up's answer is applied when the link has collected it, which
// may be seconds after live events that came after it on the wire. Its
// DeviceState is the PBX's word at the moment it was written; the live
// DeviceStateChange/ExtensionStatus that follow it are newer. Asterisk
// raises one of those for every device state change, so the live events
// alone converge, and an answer may never override what a live event set
// since the action was handed out.

// endpointDetail is the PJSIPShowEndpoint answer for ep, as pbxsim and
// Asterisk write it (the items carry the action's ActionID).
func endpointDetail(ep, state string) ami.Response {
	return ami.Response{Items: []ami.Message{
		ev("EndpointDetail", "ActionID", "a-1", "ObjectType", "endpoint", "ObjectName", ep, "DeviceState", state),
		ev("EndpointDetailComplete", "ActionID", "a-1", "EventList", "Complete", "ListItems", "1"),
	}}
}

// askedEndpoint makes the engine ask for ep's details (a phone registered)
// and returns the action the link sends.
func askedEndpoint(t *testing.T, e *Engine, ep string) ami.Message {
	t.Helper()
	e.Apply(ev("ContactStatus", "EndpointName", ep, "AOR", ep, "URI", "sip:"+ep+"@127.0.0.1:5201", "ContactStatus", "Reachable"))
	acts := e.Followups(FollowPending)
	if len(acts) != 1 || acts[0].Action() != ami.ActionPJSIPShowEndpoint {
		t.Fatalf("follow-ups: %s", names(acts))
	}
	return acts[0]
}

func liveEngine() *Engine {
	e := New(Config{Names: map[string]string{"201": "", "202": ""}, Trunks: []string{"trunk"}})
	e.SetLink(LinkLive)
	return e
}

// TestLateAnswerNeverOverridesLiveIdle is what the 500 calls/s e2e run
// showed: "In use" written while the call was up, then Hangup, Idle and
// NOT_INUSE on the wire, then the answer applied: the extension is idle.
func TestLateAnswerNeverOverridesLiveIdle(t *testing.T) {
	e := liveEngine()
	act := askedEndpoint(t, e, "201")
	e.Apply(ev("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", "1", "StatusText", "InUse"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "INUSE"))
	// The answer is written here; the call ends after it.
	e.Apply(ev("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", "0", "StatusText", "Idle"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "NOT_INUSE"))
	e.ApplyAnswer(act, endpointDetail("201", "In use"), nil)
	if st := e.Publish().Extensions.Get("201").Status; st != "online" {
		t.Errorf("201 after the late answer: %q, want online (NOT_INUSE came after it)", st)
	}
	// A later live event still moves it.
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "RINGING"))
	if st := e.Publish().Extensions.Get("201").Status; st != "ringing" {
		t.Errorf("201 after RINGING: %q", st)
	}
}

// TestAnswerWithoutNewerLiveEventApplies: no live event touched the
// status since the action was handed out, so the answer is the newest
// word and is applied.
func TestAnswerWithoutNewerLiveEventApplies(t *testing.T) {
	e := liveEngine()
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "NOT_INUSE"))
	act := askedEndpoint(t, e, "201")
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/202", "State", "INUSE")) // another extension
	e.ApplyAnswer(act, endpointDetail("201", "In use"), nil)
	s := e.Publish()
	if st := s.Extensions.Get("201").Status; st != "busy" {
		t.Errorf("201: %q, want busy (the answer is newer than NOT_INUSE)", st)
	}
	if st := s.Extensions.Get("202").Status; st != "busy" {
		t.Errorf("202: %q", st)
	}
}

// TestAnswerNotHandedOutIsOlderThanLive: an answer to an action the engine
// did not hand out (Link.Refresh's) has no known moment; it never
// overrides a live status.
func TestAnswerNotHandedOutIsOlderThanLive(t *testing.T) {
	e := liveEngine()
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "NOT_INUSE"))
	e.ApplyAnswer(ami.NewAction(ami.ActionPJSIPShowEndpoint, "Endpoint", "201"), endpointDetail("201", "In use"), nil)
	if st := e.Publish().Extensions.Get("201").Status; st != "online" {
		t.Errorf("201: %q, want online", st)
	}
}

// TestResyncEndpointItemAfterLiveIdle: a PJSIPShowEndpoints item is a list
// item like ExtensionStateList's: applied after a live NOT_INUSE that came
// since the lists were asked for, it does not override it.
func TestResyncEndpointItemAfterLiveIdle(t *testing.T) {
	e := liveEngine()
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "INUSE"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/trunk", "State", "INUSE"))
	e.BeginResync()
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "NOT_INUSE"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/trunk", "State", "NOT_INUSE"))
	e.Apply(ev("EndpointList", "ActionID", "r-1", "ObjectName", "201", "DeviceState", "In use"))
	e.Apply(ev("EndpointList", "ActionID", "r-1", "ObjectName", "202", "DeviceState", "In use"))
	e.Apply(ev("EndpointList", "ActionID", "r-1", "ObjectName", "trunk", "DeviceState", "In use"))
	e.EndResync()
	s := e.Publish()
	if st := s.Extensions.Get("201").Status; st != "online" {
		t.Errorf("201: %q, want online (live NOT_INUSE is newer than the list)", st)
	}
	if st := s.Extensions.Get("202").Status; st != "busy" {
		t.Errorf("202: %q, want busy (only the list spoke)", st)
	}
	if st := s.Trunks.Get("trunk").Status; st != "online" {
		t.Errorf("trunk: %q, want online", st)
	}
}

// TestLateRefreshListNeverOverridesLiveTrunk: the periodic PJSIPShowEndpoints
// answer covers trunks too.
func TestLateRefreshListNeverOverridesLiveTrunk(t *testing.T) {
	e := liveEngine()
	var list ami.Message
	for _, a := range e.Followups(FollowRefresh) {
		if a.Action() == ami.ActionPJSIPShowEndpoints {
			list = a
		}
	}
	if list.Action() == "" {
		t.Fatal("no PJSIPShowEndpoints in the refresh")
	}
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/trunk", "State", "INUSE"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "INUSE"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/trunk", "State", "NOT_INUSE"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "NOT_INUSE"))
	e.ApplyAnswer(list, ami.Response{Items: []ami.Message{
		ev("EndpointList", "ActionID", "a-2", "ObjectName", "trunk", "DeviceState", "In use"),
		ev("EndpointList", "ActionID", "a-2", "ObjectName", "201", "DeviceState", "In use"),
	}}, nil)
	s := e.Publish()
	if st := s.Trunks.Get("trunk").Status; st != "online" {
		t.Errorf("trunk: %q, want online", st)
	}
	if st := s.Extensions.Get("201").Status; st != "online" {
		t.Errorf("201: %q, want online", st)
	}
}

// TestLateAnswerNeverBringsBackOnline: the phone unregistered (live
// ContactStatus Removed, DeviceStateChange UNAVAILABLE) after the details
// were written; the answer's ContactStatusDetail says NonQualified. The
// extension stays offline.
func TestLateAnswerNeverBringsBackOnline(t *testing.T) {
	e := liveEngine()
	act := askedEndpoint(t, e, "201")
	e.Apply(ev("ContactStatus", "EndpointName", "201", "AOR", "201", "URI", "sip:201@127.0.0.1:5201", "ContactStatus", "Removed"))
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/201", "State", "UNAVAILABLE"))
	resp := endpointDetail("201", "Not in use")
	resp.Items = append(resp.Items[:1:1],
		ev("ContactStatusDetail", "ActionID", "a-1", "AOR", "201", "URI", "sip:201@127.0.0.1:5201", "Status", "NonQualified", "EndpointName", "201"),
		resp.Items[1])
	e.ApplyAnswer(act, resp, nil)
	if st := e.Publish().Extensions.Get("201").Status; st != "offline" {
		t.Errorf("201: %q, want offline (it unregistered after the answer was written)", st)
	}
	// It registers again: online.
	e.Apply(ev("ContactStatus", "EndpointName", "201", "AOR", "201", "URI", "sip:201@127.0.0.1:5201", "ContactStatus", "Created"))
	if st := e.Publish().Extensions.Get("201").Status; st != "online" {
		t.Errorf("201 registered again: %q", st)
	}
}

// TestLateDNDReadNeverOverridesToggle: FreePBX's *76 sets AstDB DND/201
// and the Custom:DND201 device state (live). A DBGetTree DND handed out
// before the toggle and answered after it (empty family: off) leaves DND
// on; a read handed out after it is applied.
func TestLateDNDReadNeverOverridesToggle(t *testing.T) {
	e := liveEngine()
	var tree ami.Message
	for _, a := range e.Followups(FollowRefresh) {
		if a.Action() == ami.ActionDBGetTree && a.Get("Family") == "DND" {
			tree = a
		}
	}
	if tree.Action() == "" {
		t.Fatal("no DBGetTree DND in the refresh")
	}
	e.Apply(ev("DeviceStateChange", "Device", "Custom:DND201", "State", "BUSY"))
	notFound := &ami.ActionError{Action: "DBGetTree", Message: "Database entry not found"}
	e.ApplyAnswer(tree, ami.Response{}, notFound)
	if !e.Publish().Extensions.Get("201").DND {
		t.Error("DND off after a read older than the toggle")
	}
	for _, a := range e.Followups(FollowRefresh) {
		if a.Action() == ami.ActionDBGetTree && a.Get("Family") == "DND" {
			e.ApplyAnswer(a, ami.Response{}, notFound)
		}
	}
	if e.Publish().Extensions.Get("201").DND {
		t.Error("DND still on after a read newer than the toggle said off")
	}
}
