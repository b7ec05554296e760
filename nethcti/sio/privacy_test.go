package sio

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/nethcti/shape"
)

// harness is a Server whose fan-out is driven by the test (no Run, no
// sockets): one client per user, its packets kept.
type harness struct {
	s     *Server
	eng   *calls.Engine
	users *auth.Users
	got   map[*client]*[]*packet
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
	eng.Publish()
	users := testUsers(t)
	svc := auth.NewService(users, auth.Config{})
	s, err := New(eng, NativeLogin{svc}, UsersDirectory(svc.Users), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	at := time.Now()
	s.now = func() time.Time { return at }
	s.proj.reset(eng.Snapshot())
	h := &harness{s: s, eng: eng, users: users, got: map[*client]*[]*packet{}}
	for _, u := range users.All() {
		h.addClient(u)
	}
	return h
}

func (h *harness) addClient(u *auth.User) *client {
	got := new([]*packet)
	c := &client{s: h.s, tookOver: make(chan struct{}), done: make(chan struct{})}
	c.sink = func(p *packet) { *got = append(*got, p) }
	c.view.Store(newView(u, "desktop"))
	h.s.add(c)
	h.got[c] = got
	return c
}

// TestFilterMatchesView: over recordings of real calls (two extensions,
// a queue, a parking, a trunk, a conference), every event each user's
// client gets is the engine's bytes in the class the user's auth.View
// gives (the same filter as REST and /ws), in NethCTI's shape; the events
// about an extension's own calls (extenHangup, extenConnected) go to its
// owners only; and every user gets every extension's update, as a /ws
// client subscribed to extensions does.
func TestFilterMatchesView(t *testing.T) {
	hidden := 0
	for _, rec := range []string{"basic_call_caller_hangup", "queue_answered", "park_retrieve", "inbound_trunk_did", "confbridge_3_party", "mwi_voicemail"} {
		t.Run(rec, func(t *testing.T) {
			h := newHarness(t)
			for _, msg := range loadRecording(t, rec) {
				h.eng.Apply(msg)
				h.eng.Publish()
				cs, _ := h.eng.Feed().Since(h.s.proj.last)
				h.s.pump(h.eng.Feed())
				exts := 0
				for _, ch := range cs {
					if ch.Type == calls.ExtenUpdate {
						exts++
					}
				}
				for c, got := range h.got {
					v := c.view.Load()
					n := 0
					for _, p := range *got {
						if p.name == "extenUpdate" {
							n++
						}
						want, full, ok := expected(t, h, v, cs, p)
						if !ok {
							t.Fatalf("%s got %s %s: not one of the changes' in its class", v.user.Username, p.name, p.data)
						}
						if !bytes.Equal(want, full) {
							hidden++
						}
					}
					if n != exts {
						t.Fatalf("%s got %d extenUpdate for %d changes", v.user.Username, n, exts)
					}
					*got = (*got)[:0]
				}
			}
		})
	}
	if hidden == 0 {
		t.Error("no event had anything hidden: the recordings do not test privacy")
	}
}

// TestQueueParkingShapes: queueUpdate, queueMemberUpdate and
// parkingUpdate carry NethCTI's names as the front's reads do (package
// shape): the queue's counters and service level, the member's
// callsTakenCount, a free space's parkedCaller {}, a parked caller's
// seconds left.
func TestQueueParkingShapes(t *testing.T) {
	want := map[string][]string{
		"queueUpdate":       {`"completedCallsCount":`, `"abandonedCallsCount":`, `"avgHoldTime":`, `"serviceLevelPercentage":"`},
		"queueMemberUpdate": {`"callsTakenCount":`, `"lastPausedInReason":`},
		"parkingUpdate":     {`"parkedCaller":{}`, `"parkedCaller":{"`, `"timeout":`},
	}
	seen := map[string]map[string]bool{}
	for _, rec := range []string{"queue_answered", "park_retrieve"} {
		h := newHarness(t)
		root, _ := h.users.Lookup("root")
		c := h.addClient(root)
		for _, msg := range loadRecording(t, rec) {
			h.eng.Apply(msg)
			h.eng.Publish()
			h.s.pump(h.eng.Feed())
		}
		for _, p := range *h.got[c] {
			for _, w := range want[p.name] {
				if strings.Contains(string(p.data), w) {
					if seen[p.name] == nil {
						seen[p.name] = map[string]bool{}
					}
					seen[p.name][w] = true
				}
			}
		}
	}
	for name, ws := range want {
		for _, w := range ws {
			if !seen[name][w] {
				t.Errorf("no %s with %s", name, w)
			}
		}
	}
}

// expected finds the bytes p should hold for a client of view v among
// the changes cs (and those of the same change in class Full).
func expected(t testing.TB, h *harness, v *view, cs []calls.Change, p *packet) (want, full []byte, ok bool) {
	t.Helper()
	for i := range cs {
		ch := &cs[i]
		var w, f []byte
		switch {
		case p.name == "extenUpdate" && ch.Type == calls.ExtenUpdate:
			username := ""
			if u, ok := h.s.dir.UserOf(ch.Key); ok {
				username = u.Username
			}
			cls := auth.ViewOf(v.user).Class(ch.Key)
			w, _ = nethctiExtension(ch.JSON(cls), username)
			f, _ = nethctiExtension(ch.Data, username)
		case p.name == "queueUpdate" && ch.Type == calls.QueueMembers:
			w, f = reshaped(t, ch.Whole(auth.ViewOf(v.user).Class("")), shape.Queue), reshaped(t, ch.Whole(calls.Full), shape.Queue)
		case p.name == ch.Type.String() && ch.Type == calls.QueueUpdate:
			w, f = reshaped(t, ch.JSON(auth.ViewOf(v.user).Class("")), shape.Queue), reshaped(t, ch.Data, shape.Queue)
		case p.name == ch.Type.String() && ch.Type == calls.QueueMemberUpdate:
			m := func(m map[string]any) { shape.Member(m, "") }
			w, f = reshaped(t, ch.JSON(auth.ViewOf(v.user).Class("")), m), reshaped(t, ch.Data, m)
		case p.name == ch.Type.String() && ch.Type == calls.ParkingUpdate:
			pk := func(p map[string]any) { shape.Parking(p, h.s.now().Unix()) }
			w, f = reshaped(t, ch.JSON(auth.ViewOf(v.user).Class("")), pk), reshaped(t, ch.Data, pk)
		case p.name == "confBridgeUpdate" && ch.Type == calls.ConferenceUpdate:
			room, _ := ch.Conference()
			if !auth.SeesConference(v.user, ch.Key, room.ExtenIDs) && !auth.Allowed(v.user, auth.SeeCalls, "") {
				continue
			}
			w, f = ch.ConferenceJSONFor(auth.ViewOf(v.user).SeesMember), ch.Data
		case (p.name == "extenHangup" || p.name == "extenConnected") && ch.Type == calls.ExtenUpdate:
			if !v.user.Owns(ch.Key) {
				continue
			}
			w = connectedJSON(ch.Key)
			if p.name == "extenHangup" {
				// The cause is the ended conversation's: any of the
				// change's, or normal_clearing.
				w = hangupJSON(ch.Key, "normal_clearing")
				for _, hu := range ch.Hangups() {
					if b := hangupJSON(ch.Key, causeOf(ch.Hangups(), hu.UniqueID)); bytes.Equal(b, p.data) {
						w = b
					}
				}
			}
			f = w
		case p.name == "userMainPresenceUpdate" || p.name == "newVoiceMessageCounter" || p.name == "confBridgeEnd":
			// Presence, a mailbox's count and a room's end hide nothing.
			return p.data, p.data, true
		}
		if w != nil && bytes.Equal(w, p.data) {
			return w, f, true
		}
	}
	return nil, nil, false
}

// reshaped is b in NethCTI's shape (package shape), as the front's reads.
func reshaped(t testing.TB, b []byte, f func(map[string]any)) []byte {
	t.Helper()
	out, err := shape.Object(b, f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
