package rest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// dbValue is a DBGetResponse as Asterisk sends it.
func dbValue(fam, key, val string) ami.Message {
	return ami.NewMessage(ami.Header{Key: "Event", Value: "DBGetResponse"}, ami.Header{Key: "Family", Value: fam},
		ami.Header{Key: "Key", Value: key}, ami.Header{Key: "Val", Value: val})
}

// refresher records what actions asked to re-read.
type refresher struct {
	mu   sync.Mutex
	asks [][]ami.Message
}

func (r *refresher) Refresh(actions ...ami.Message) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asks = append(r.asks, actions)
	return true
}

func (r *refresher) taken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, as := range r.asks {
		for _, a := range as {
			out = append(out, a.Action()+" "+a.Get("Family")+"/"+a.Get("Key"))
		}
	}
	r.asks = nil
	return out
}

// withCellphone gives bob a cellphone; the other users are testUsers'.
func withCellphone(t *testing.T) func(*Config) {
	return func(c *Config) {
		h := testHash()
		us, err := auth.NewUsers([]auth.User{
			{Username: "alice", PasswordHash: h, Endpoints: []string{"2000"}, Groups: []string{"reception"}},
			{Username: "bob", PasswordHash: h, Endpoints: []string{"2001"}, Groups: []string{"sales"}, Cellphone: "3331234567"},
			{Username: "paula", PasswordHash: h, Endpoints: []string{"2006"}, Permissions: []string{auth.PermOperatorPanel}},
			{Username: "olga", PasswordHash: h, Role: auth.RoleOperator, Endpoints: []string{"2009"}, Groups: []string{"reception"}},
			{Username: "root", PasswordHash: h, Role: auth.RoleAdmin},
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = auth.NewService(us, auth.Config{})
	}
}

func TestForwardAndDNDReads(t *testing.T) {
	f := newFixture(t, false, nil)
	f.eng.Apply(dbValue("CF", "2007", "0721405516"))
	f.eng.Apply(dbValue("DND", "2008", "YES"))
	f.eng.Publish()
	for _, c := range []struct {
		path, user string
		status     int
		body       string
	}{
		{"/astproxy/cfcall/unconditional/2007", "alice", 200, `{"exten":"2007","status":"on","type":"unconditional","to":"0721405516"}`},
		{"/astproxy/cfcall/busy/2007", "bob", 200, `{"exten":"2007","status":"off","type":"busy"}`},
		{"/astproxy/cfcall/unavailable/2000", "alice", 200, `{"exten":"2000","status":"off","type":"unavailable"}`},
		{"/astproxy/dnd/2008", "alice", 200, `{"exten":"2008","status":"on"}`},
		{"/astproxy/dnd/2007", "root", 200, `{"exten":"2007","status":"off"}`},
		{"/astproxy/cfcall/sometimes/2007", "alice", 400, ""},
		{"/astproxy/cfcall/busy/2999", "alice", 404, ""},
		{"/astproxy/dnd/2999", "alice", 404, ""},
		{"/astproxy/dnd/2007", "", 401, ""},
	} {
		r := f.do("GET", c.path, c.user, "")
		if r.status != c.status || (c.body != "" && strings.TrimSpace(string(r.body)) != c.body) {
			t.Errorf("GET %s as %q: %d %s, want %d %s", c.path, c.user, r.status, r.body, c.status, c.body)
		}
	}
	// The extension itself shows them too.
	var x map[string]any
	json.Unmarshal(f.do("GET", "/astproxy/extension/2007", "alice", "").body, &x)
	if x["cf"] != "0721405516" {
		t.Errorf("extension 2007: cf %v", x["cf"])
	}
}

func TestVoicemailCounters(t *testing.T) {
	f := newFixture(t, false, nil)
	if r := f.do("GET", "/voicemail/new_counters", "alice", ""); r.status != 200 || string(r.body) != "{}" {
		t.Fatalf("no mailbox reported yet: %d %s", r.status, r.body)
	}
	f.eng.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "MessageWaiting"}, ami.Header{Key: "Mailbox", Value: "2005@default"},
		ami.Header{Key: "Waiting", Value: "1"}, ami.Header{Key: "New", Value: "2"}, ami.Header{Key: "Old", Value: "1"}))
	f.eng.Publish()
	r := f.do("GET", "/voicemail/new_counters", "bob", "")
	if r.status != 200 || string(r.body) != `{"2005":{"newMessageCount":2}}` {
		t.Errorf("new_counters: %d %s", r.status, r.body)
	}
	if r2 := f.do("GET", "/voicemail/new_counters", "bob", "", "If-None-Match", r.header.Get("ETag")); r2.status != 304 {
		t.Errorf("same version again: %d", r2.status)
	}
	if b := f.do("GET", "/astproxy/extension/2005", "bob", "").body; !strings.Contains(string(b), `"voicemail":{"new":2,"old":1}`) {
		t.Errorf("extension 2005 without its voicemail: %s", b)
	}
}

func TestPresenceReads(t *testing.T) {
	f := newFixture(t, false, withCellphone(t))
	get := func(user string) (int, string) {
		r := f.do("GET", "/user/presence", user, "")
		return r.status, strings.TrimSpace(string(r.body))
	}
	// alice's 2000 is in a call (synth), paula's 2006 idle.
	if s, b := get("alice"); s != 200 || b != `{"status":"online","mainPresence":"busy"}` {
		t.Errorf("alice: %d %s", s, b)
	}
	if s, b := get("paula"); s != 200 || b != `{"status":"online","mainPresence":"online"}` {
		t.Errorf("paula: %d %s", s, b)
	}
	if s, _ := get("root"); s != 409 {
		t.Errorf("root has no extension: %d", s)
	}
	f.eng.Apply(dbValue("DND", "2000", "YES"))
	f.eng.Apply(dbValue("CF", "2006", "vmu2006"))
	f.eng.Apply(dbValue("CF", "2001", "3331234567"))
	f.eng.Apply(dbValue("CF", "2009", "0721405516"))
	f.eng.Publish()
	for user, want := range map[string]string{"alice": "dnd", "paula": "voicemail", "bob": "cellphone", "olga": "callforward"} {
		if s, b := get(user); s != 200 || b != `{"status":"`+want+`","mainPresence":"`+want+`"}` {
			t.Errorf("%s: %d %s, want %s", user, s, b, want)
		}
	}
	for user, want := range map[string]string{"alice": `["online","dnd","voicemail","callforward"]`, "bob": `["online","dnd","voicemail","cellphone","callforward"]`} {
		if r := f.do("GET", "/user/presencelist", user, ""); r.status != 200 || strings.TrimSpace(string(r.body)) != want {
			t.Errorf("%s presencelist: %d %s", user, r.status, r.body)
		}
	}
}

func TestPostPresenceSendsAMI(t *testing.T) {
	ref := &refresher{}
	f := newFixture(t, true, func(c *Config) { withCellphone(t)(c); c.Refresh = ref })
	const (
		dndOff = "Action: DBDel\nFamily: DND\nKey: 2001\n|Action: Setvar\nVariable: DEVICE_STATE(Custom:DND2001)\nValue: NOT_INUSE\n|"
		dndOn  = "Action: DBPut\nFamily: DND\nKey: 2001\nVal: YES\n|Action: Setvar\nVariable: DEVICE_STATE(Custom:DND2001)\nValue: BUSY\n|"
		cfOff  = "Action: DBDel\nFamily: CF\nKey: 2001\n|"
	)
	refreshed := []string{"DBGet CF/2001", "DBGet CFB/2001", "DBGet CFU/2001", "DBGet DND/2001"}
	n := 0
	for _, c := range []struct{ body, want string }{
		{`{"status":"online"}`, dndOff + cfOff},
		{`{"status":"dnd"}`, dndOn + cfOff},
		{`{"status":"voicemail"}`, dndOff + "Action: DBPut\nFamily: CF\nKey: 2001\nVal: vmu2001\n|"},
		{`{"status":"cellphone"}`, dndOff + "Action: DBPut\nFamily: CF\nKey: 2001\nVal: 3331234567\n|"},
		{`{"status":"callforward","to":"0721405516"}`, dndOff + "Action: DBPut\nFamily: CF\nKey: 2001\nVal: 0721405516\n|"},
	} {
		r := f.do("POST", "/user/presence", "bob", c.body)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.body, r.status, r.body)
		}
		var got string
		sent := f.sent()
		for _, m := range sent[n:] {
			got += headers(m) + "|"
		}
		n = len(sent)
		if got != c.want {
			t.Errorf("%s sent:\n%s\nwant:\n%s", c.body, got, c.want)
		}
		if got := ref.taken(); strings.Join(got, ",") != strings.Join(refreshed, ",") {
			t.Errorf("%s: refreshed %v, want %v", c.body, got, refreshed)
		}
	}
	for _, c := range []struct {
		user, body string
		status     int
	}{
		{"bob", `{"status":"away"}`, 400},
		{"bob", `{"status":"callforward"}`, 400},
		{"bob", `{"status":"callforward","to":"0721\r\nAction: Hangup"}`, 400},
		{"bob", `{"status":"callforward","to":"abc"}`, 400},
		{"alice", `{"status":"cellphone"}`, 409}, // alice has no cellphone
		{"root", `{"status":"dnd"}`, 409},        // no extension
		{"", `{"status":"dnd"}`, 401},
	} {
		if r := f.do("POST", "/user/presence", c.user, c.body); r.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.user, c.body, r.status, r.body, c.status)
		}
	}
	if m := len(f.sent()); m != n {
		t.Errorf("%d actions reached the PBX from refused requests", m-n)
	}
	// cfcall and dnd read back what they wrote too.
	if r := f.do("POST", "/astproxy/cfcall", "alice", `{"endpointId":"2000","type":"busy","to":"2008"}`); r.status != 200 {
		t.Fatalf("cfcall: %d %s", r.status, r.body)
	}
	if got := ref.taken(); len(got) != 4 || got[1] != "DBGet CFB/2000" {
		t.Errorf("cfcall refreshed %v", got)
	}
}

// TestPresenceOfMatchesEngine: the presence REST answers is the one the
// engine announces in userPresenceUpdate.
func TestPresenceOfMatchesEngine(t *testing.T) {
	e := calls.New(calls.Config{Names: map[string]string{"201": "Alice"}, Cellphones: map[string]string{"201": "333"}})
	e.SetLink(calls.LinkLive)
	e.Apply(dbValue("CF", "201", "333"))
	s := e.Publish()
	cs, _ := e.Feed().Since(0)
	var last string
	for _, c := range cs {
		if c.Type == calls.UserPresenceUpdate && c.Key == "201" {
			last = string(c.Data)
		}
	}
	x := s.Extensions.Get("201")
	if want := `{"exten":"201","status":"` + calls.PresenceOf(&x, "333") + `"}`; last != want || !strings.Contains(last, "cellphone") {
		t.Errorf("userPresenceUpdate %s, REST's presence %s", last, want)
	}
}

// TestPresencePermissionTable: reads of forwards, DND, voicemail counters
// and presence are open to every signed-in user (presence is never
// hidden); POST user/presence acts on the user's own main extension only,
// so it needs no more than what every user has there.
func TestPresencePermissionTable(t *testing.T) {
	f := newFixture(t, true, nil)
	reads := []string{"/astproxy/cfcall/busy/2003", "/astproxy/dnd/2003", "/voicemail/new_counters", "/user/presencelist"}
	for _, user := range []string{"alice", "bob", "paula", "olga", "root"} {
		for _, p := range reads {
			if r := f.do("GET", p, user, ""); r.status != 200 {
				t.Errorf("GET %s as %s: %d %s", p, user, r.status, r.body)
			}
		}
		want, wantEp := 200, map[string]string{"alice": "2000", "bob": "2001", "paula": "2006", "olga": "2009"}[user]
		if user == "root" {
			want = 409 // no extension of its own
		}
		before := len(f.sent())
		if r := f.do("POST", "/user/presence", user, `{"status":"dnd"}`); r.status != want {
			t.Errorf("POST user/presence as %s: %d %s, want %d", user, r.status, r.body, want)
		}
		for _, m := range f.sent()[before:] {
			if k := m.Get("Key") + m.Get("Variable"); !strings.Contains(k, wantEp) || wantEp == "" {
				t.Errorf("%s's presence touched %s", user, k)
			}
		}
	}
	for _, p := range append(reads, "/user/presence") {
		if r := f.do("GET", p, "", ""); r.status != 401 {
			t.Errorf("GET %s without a token: %d", p, r.status)
		}
	}
}
