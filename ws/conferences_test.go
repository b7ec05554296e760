package ws

import (
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// received replays a recording of the real Asterisk 22 and returns, per
// user, the data of every event of type typ it received.
func received(t *testing.T, e *env, path, typ string, users []string) map[string][]string {
	t.Helper()
	clients := map[string]*Client{}
	seqs := map[string]uint64{}
	got := map[string][]string{}
	for _, u := range users {
		c := e.dial(u)
		expectOp(t, c, "hello")
		c.Subscribe("extensions")
		expectOp(t, c, "snapshot")
		clients[u] = c
	}
	for _, m := range amitest.ReadRecording(t, path) {
		e.apply(m)
		s := e.marker()
		for _, u := range users {
			for seqs[u] < s.Seq {
				msg := next(t, clients[u])
				if msg.Op != "event" {
					continue
				}
				seqs[u] = msg.Seq
				if msg.Type == typ {
					got[u] = append(got[u], string(msg.Data))
				}
			}
		}
	}
	return got
}

// TestConferenceUpdateTargeting: room 1000 with 201, 202 and 203 reaches
// who may see it (admin, operator_panel, the operator, the members' own
// users), never dave (204), and ends with an empty room.
func TestConferenceUpdateTargeting(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	users := []string{"alice", "bob", "olga", "dave", "paula", "root"}
	got := received(t, e, "../calls/testdata/confbridge_actions.ami", "conferenceUpdate", users)
	for _, u := range users {
		if want := u != "dave"; (len(got[u]) > 0) != want {
			t.Errorf("%s received %d conferenceUpdate events, want them: %v", u, len(got[u]), want)
		}
	}
	r := got["root"]
	if len(r) == 0 || !strings.Contains(r[0], `"id":"1000"`) || r[len(r)-1] != `{"id":"1000","locked":false,"users":{}}` {
		t.Errorf("root's conference updates: %v", r)
	}
	muted := false
	for _, d := range r {
		muted = muted || strings.Contains(d, `"extenId":"202","joinTime":`) && strings.Contains(d, `"muted":true`)
	}
	if !muted {
		t.Error("Bob's mute never reached root")
	}
}

// TestExtenRingingClickToCall: in originate_click_to_call the PBX first
// rings Alice's own phone (201) for the call she asked for: that is no
// incoming call, so only Bob (202), the rung party, gets extenRinging, with
// the phonebook's name of the caller.
func TestExtenRingingClickToCall(t *testing.T) {
	book := map[string]string{"201": "Alice (phonebook)"}
	e := newEnv(t, calls.Config{NameLookup: func(n string) string { return book[n] }}, auth.Config{}, Config{})
	users := []string{"alice", "bob", "root"}
	got := received(t, e, "../ami/testdata/originate_click_to_call.ami", "extenRinging", users)
	if len(got["alice"]) != 0 || len(got["root"]) != 0 {
		t.Errorf("extenRinging for alice %v, root %v: want none (her own click-to-call leg)", got["alice"], got["root"])
	}
	if b := got["bob"]; len(b) != 1 || !strings.Contains(b[0], `"exten":"202"`) || !strings.Contains(b[0], `"callerNum":"201"`) ||
		!strings.Contains(b[0], `"phonebookName":"Alice (phonebook)"`) {
		t.Errorf("bob's extenRinging: %v", b)
	}
}
