package calls

import (
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

func ev(name string, kv ...string) ami.Message {
	m := ami.NewMessage(ami.Header{Key: "Event", Value: name})
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

func names(ms []ami.Message) string {
	var out []string
	for _, m := range ms {
		s := m.Action()
		for _, k := range []string{"Family", "Key", "Endpoint", "Mailbox"} {
			if v := m.Get(k); v != "" {
				s += " " + v
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// TestAstDBBadValuesIgnored: a forward target with letters or CR/LF, a DND
// value that is not YES, a name with control characters never become
// state (nor, later, an AMI header); each is counted.
func TestAstDBBadValuesIgnored(t *testing.T) {
	e := New(Config{Names: map[string]string{"201": ""}})
	e.Apply(ev("DBGetResponse", "Family", "CF", "Key", "201", "Val", "202"))
	for _, m := range []ami.Message{
		ev("DBGetResponse", "Family", "CF", "Key", "201", "Val", "20a"),
		ev("DBGetResponse", "Family", "CF", "Key", "201", "Val", "202\r\nAction: Hangup"),
		ev("DBGetResponse", "Family", "CFB", "Key", "201", "Val", strings.Repeat("1", 33)),
		ev("DBGetResponse", "Family", "CFB", "Key", "201", "Val", "vmx201"),
		ev("DBGetResponse", "Family", "CFB", "Key", "201", "Val", "vmu"),
		ev("DBGetResponse", "Family", "DND", "Key", "201", "Val", "maybe"),
		ev("DBGetTreeResponse", "Key", "/AMPUSER/201/cidname", "Val", "Eve\x01"),
	} {
		e.Apply(m)
	}
	s := e.Publish()
	x := s.Extensions.Get("201")
	if x.CF != "202" || x.CFB != "" || x.DND || x.Name != "" {
		t.Errorf("bad values became state: %+v", x)
	}
	if n := e.Stats().BadValues; n != 7 {
		t.Errorf("BadValues = %d, want 7", n)
	}
	// FreePBX's own voicemail extensions are targets, not bad values.
	e.Apply(ev("DBGetResponse", "Family", "CFU", "Key", "201", "Val", "vmu201"))
	if x := e.Publish().Extensions.Get("201"); x.CFU != "vmu201" || e.Stats().BadValues != 7 {
		t.Errorf("vmu201: %+v", x)
	}
}

// TestDBGetTreeReplacesFamily: a DBGetTree answer lists the whole family,
// so an extension it does not list has no forward; "not found" is an
// empty family.
func TestDBGetTreeReplacesFamily(t *testing.T) {
	e := New(Config{Names: map[string]string{"201": "", "202": ""}})
	e.Apply(ev("DBGetResponse", "Family", "CF", "Key", "202", "Val", "303"))
	tree := ami.NewAction("DBGetTree", "Family", "CF")
	e.ApplyAnswer(tree, ami.Response{Items: []ami.Message{ev("DBGetTreeResponse", "Key", "/CF/201", "Val", "0721405516")}}, nil)
	s := e.Publish()
	if s.Extensions.Get("201").CF != "0721405516" || s.Extensions.Get("202").CF != "" {
		t.Errorf("after the tree: 201 %q, 202 %q", s.Extensions.Get("201").CF, s.Extensions.Get("202").CF)
	}
	e.ApplyAnswer(tree, ami.Response{}, &ami.ActionError{Action: "DBGetTree", Message: "Database entry not found"})
	if s := e.Publish(); s.Extensions.Get("201").CF != "" {
		t.Errorf("empty family: 201 %q", s.Extensions.Get("201").CF)
	}
}

// TestFollowupsAsked: what a resync wants, what events ask, and the
// fallback of a PBX without DBGetTree.
func TestFollowupsAsked(t *testing.T) {
	e := New(Config{Trunks: []string{"trunk"}})
	e.BeginResync()
	e.Apply(ev("EndpointList", "ObjectName", "201", "DeviceState", "Not in use"))
	e.Apply(ev("EndpointList", "ObjectName", "trunk", "DeviceState", "Not in use"))
	e.Apply(ev("DeviceStateChange", "Device", "MWI:201@default", "State", "NOT_INUSE"))
	got := names(e.Followups(FollowResync))
	want := "Parkinglots, DBGetTree CF, DBGetTree CFB, DBGetTree CFU, DBGetTree DND, DBGetTree AMPUSER, DBGetTree DEVICE, VoicemailUsersList, PJSIPShowEndpoint 201, MailboxCount 201@default"
	if got != want {
		t.Errorf("resync follow-ups:\n%s\nwant:\n%s", got, want)
	}
	if got := e.Followups(FollowPending); len(got) != 0 {
		t.Errorf("asked twice: %s", names(got))
	}
	// DBGetTree refused: DBGet per extension, now and at every refresh.
	e.ApplyAnswer(ami.NewAction("DBGetTree", "Family", "CF"), ami.Response{},
		&ami.ActionError{Action: "DBGetTree", Message: "Invalid/unknown command: DBGetTree. Use Action: ListCommands to show available commands."})
	if got := names(e.Followups(FollowPending)); got != "DBGet CF 201" {
		t.Errorf("fallback: %s", got)
	}
	if got := names(e.Followups(FollowRefresh)); got != "DBGet CF 201, DBGet CFB 201, DBGet CFU 201, DBGet DND 201, PJSIPShowEndpoints" {
		t.Errorf("refresh without DBGetTree: %s", got)
	}
	// A counted mailbox is not asked again; a registering phone is detailed.
	e.ApplyAnswer(ami.NewAction("MailboxCount", "Mailbox", "201@default"),
		ami.Response{Message: ami.NewMessage(ami.Header{Key: "Response", Value: "Success"}, ami.Header{Key: "Mailbox", Value: "201@default"},
			ami.Header{Key: "NewMessages", Value: "3"}, ami.Header{Key: "OldMessages", Value: "1"})}, nil)
	e.Apply(ev("DeviceStateChange", "Device", "MWI:201@default", "State", "INUSE"))
	e.Apply(ev("ContactStatus", "EndpointName", "201", "AOR", "201", "URI", "sip:201@127.0.0.1:5201", "ContactStatus", "Reachable"))
	if got := names(e.Followups(FollowPending)); got != "PJSIPShowEndpoint 201" {
		t.Errorf("pending: %s", got)
	}
	e.EndResync()
	if v := e.Publish().Extensions.Get("201").Voicemail; v == nil || v.New != 3 || v.Old != 1 {
		t.Errorf("voicemail %+v", v)
	}
}

// TestNamesRefreshedPeriodically: one refresh in namesEvery re-reads the
// names: AMPUSER, and the details of every endpoint the list answers.
func TestNamesRefreshedPeriodically(t *testing.T) {
	e := New(Config{})
	e.Apply(ev("EndpointDetail", "ObjectName", "201", "Callerid", `"Alice" <201>`))
	for i := 1; i < namesEvery; i++ {
		if got := names(e.Followups(FollowRefresh)); strings.Contains(got, "AMPUSER") {
			t.Fatalf("refresh %d re-reads names: %s", i, got)
		}
		e.Apply(ev("EndpointList", "ObjectName", "201"))
		if got := names(e.Followups(FollowPending)); got != "" {
			t.Fatalf("refresh %d details 201 again: %s", i, got)
		}
	}
	if got := names(e.Followups(FollowRefresh)); !strings.Contains(got, "DBGetTree AMPUSER") {
		t.Errorf("refresh %d does not re-read AMPUSER: %s", namesEvery, got)
	}
	e.Apply(ev("EndpointList", "ObjectName", "201"))
	if got := names(e.Followups(FollowPending)); got != "PJSIPShowEndpoint 201" {
		t.Errorf("refresh %d: %q", namesEvery, got)
	}
}
