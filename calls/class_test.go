package calls_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"golang.org/x/crypto/bcrypt"
)

// The NumbersHidden class, field by field: what was auth/view.go's JSON
// rewriting (TestViewRedacts, TestViewRedactsConversationExtras,
// TestViewConference) with the same expectations, now written by the
// encoders. Each hidden encoding is compared with the full encoding of
// the same value with exactly the hidden fields blanked and the channel
// names made opaque, so a field left out of the rule, or one blanked by
// mistake, fails.

func classUsers(t *testing.T) (alice, paula *auth.User) {
	t.Helper()
	h, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", PasswordHash: string(h), Role: auth.RoleUser, Endpoints: []string{"201"}},
		{Username: "paula", PasswordHash: string(h), Role: auth.RoleUser, Endpoints: []string{"205"}, Permissions: []string{auth.PermOperatorPanel}},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ = us.Lookup("alice")
	paula, _ = us.Lookup("paula")
	return alice, paula
}

// seen encodes v as a user with view sees owner's calls.
func seen(v any, view auth.View, owner string) string {
	return string(calls.EncodeAs(v, 20_000, view.Class(owner), auth.Opaquer{}))
}

func full(v any) string { return string(calls.EncodeAs(v, 20_000, calls.Full, nil)) }

func TestHiddenExtension(t *testing.T) {
	alice, paula := classUsers(t)
	id := "PJSIP/202-1>Local/0612345678@from-internal-0000002a;1"
	conv := calls.Conversation{ID: id, Owner: "202", LinkedID: "1.1", UniqueID: "1.2", Connected: true,
		Direction: "in", CounterpartNum: `0721 "405" \516`, CounterpartName: "Mario, {Rossi}", StartTime: 1, AnsweredAt: 2,
		Recording: "false", Extra: &calls.ConvExtra{
			Transfer: calls.Transfer{ID: "1.2", State: "consulting", Role: "target"},
			Parked:   calls.Parked{Parking: "701", By: "203", Timeout: 45},
			Spy:      calls.Spy{Exten: "204", Mode: "listen"},
		}}
	x := calls.Extension{Exten: "202", Name: "Bob", Status: "busy", Conversations: map[string]calls.Conversation{id: conv}}

	oid := auth.OpaqueConvID(id)
	want := x
	wc := conv
	wc.ID, wc.CounterpartNum, wc.CounterpartName = oid, "", ""
	extra := *conv.Extra
	extra.Parked.By, extra.Spy.Exten = "", ""
	wc.Extra = &extra
	want.Conversations = map[string]calls.Conversation{oid: wc}

	if got := seen(&x, auth.ViewOf(alice), "202"); got != full(&want) {
		t.Errorf("alice sees\n%s\nwant\n%s", got, full(&want))
	}
	if got := seen(&x, auth.ViewOf(alice), "201"); got != full(&x) {
		t.Error("own extension hidden")
	}
	if got := seen(&x, auth.ViewOf(paula), "202"); got != full(&x) {
		t.Error("operator_panel view hidden")
	}
	// The opaque ids are random hex, so the counterpart's number is looked
	// for as it would be written ("405" alone turns up in the ids about one run in a hundred).
	hid := seen(&x, auth.ViewOf(alice), "202")
	if !json.Valid([]byte(hid)) || strings.Contains(hid, "0612345678") || strings.Contains(hid, "Rossi") || strings.Contains(hid, `\"405\"`) || strings.Contains(hid, "0721") {
		t.Errorf("hidden extension leaks or is not JSON: %s", hid)
	}
	tr := calls.Trunk{Name: "trunk", Status: "busy", Conversations: calls.ConvMapOf(x.Conversations)}
	wantT := tr
	wantT.Conversations = calls.ConvMapOf(want.Conversations)
	if got := seen(&tr, auth.ViewOf(alice), ""); got != full(&wantT) {
		t.Errorf("trunk:\n%s", got)
	}
}

func TestHiddenCallers(t *testing.T) {
	alice, paula := classUsers(t)
	q := calls.Queue{Queue: "401", Name: "Support",
		Members:        map[string]*calls.QueueMember{"201": {Queue: "401", Member: "201", Name: "Alice"}},
		WaitingCallers: map[string]*calls.QueueCaller{"PJSIP/t-1": {Channel: "PJSIP/t-1", Num: "0612", Name: "Caller", Position: 1}},
		Completed:      1}
	och := auth.OpaqueChannel("PJSIP/t-1")
	wantQ := q
	wantQ.WaitingCallers = map[string]*calls.QueueCaller{och: {Channel: och, Position: 1}}
	if got := seen(&q, auth.ViewOf(alice), ""); got != full(&wantQ) {
		t.Errorf("queue:\n%s\nwant\n%s", got, full(&wantQ))
	}
	if got := seen(&q, auth.ViewOf(paula), ""); got != full(&q) {
		t.Error("operator_panel: queue hidden")
	}
	p := calls.Parking{Parking: "701", Name: "701", Timeout: 45,
		ParkedCaller: &calls.ParkedCaller{Channel: "c", Num: "0612", Name: "P", ParkedAt: 1, ParkedBy: "201"}}
	wantP := p
	wantP.ParkedCaller = &calls.ParkedCaller{Channel: auth.OpaqueChannel("c"), ParkedAt: 1, ParkedBy: "201"}
	if got := seen(&p, auth.ViewOf(alice), ""); got != full(&wantP) {
		t.Errorf("parking:\n%s", got)
	}
	free := calls.Parking{Parking: "702", Name: "702", Timeout: 45}
	if got := seen(&free, auth.ViewOf(alice), ""); got != full(&free) {
		t.Errorf("free parking: %s", got)
	}
}

func TestHiddenConference(t *testing.T) {
	alice, paula := classUsers(t)
	room := calls.Conference{ID: "1000", Users: map[string]calls.ConfUser{
		"1.1": {ID: "1.1", Name: "Alice", Owner: true, ExtenID: "201", JoinTime: 1},
		"1.2": {ID: "1.2", Name: "Mario Rossi", Talking: true, ExtenID: "0612345678", JoinTime: 2},
	}}
	want := room
	want.Users = map[string]calls.ConfUser{"1.1": room.Users["1.1"], "1.2": {ID: "1.2", Talking: true, JoinTime: 2}}
	if got := string(calls.EncodeConferenceFor(&room, auth.Opaquer{}, auth.ViewOf(alice).SeesMember)); got != full(&want) {
		t.Errorf("alice sees\n%s\nwant\n%s", got, full(&want))
	}
	if got := string(calls.EncodeConferenceFor(&room, auth.Opaquer{}, auth.ViewOf(paula).SeesMember)); got != full(&room) {
		t.Errorf("operator_panel sees %s", got)
	}
	// The class alone (no reader) hides every member.
	none := room
	none.Users = map[string]calls.ConfUser{"1.1": {ID: "1.1", Owner: true, JoinTime: 1}, "1.2": want.Users["1.2"]}
	if got := string(calls.EncodeAs(&room, 0, calls.NumbersHidden, auth.Opaquer{})); got != full(&none) {
		t.Errorf("hidden class: %s", got)
	}
}
