package calls

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// msgIndex is the index of the first message of rec
// that matches spec (golden "after" syntax).
func msgIndex(t *testing.T, rec *recording, spec string) int {
	t.Helper()
	for i, m := range rec.msgs {
		if matches(m, spec) {
			return i
		}
	}
	t.Fatalf("%s: no message %q", rec.name, spec)
	return 0
}

func confUsers(s *Snapshot, room string) map[string]bool {
	out := map[string]bool{}
	for _, u := range s.Conferences[room].Users {
		out[u.ExtenID] = true
	}
	return out
}

// TestConferenceEndedWhileDown: three phones are in room 1000 (recorded),
// the link drops, and the resync lists no channel at all: the room and its
// members are gone, not shown as live.
func TestConferenceEndedWhileDown(t *testing.T) {
	rec := loadRecording(t, "confbridge_actions")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs[:msgIndex(t, rec, "ConfbridgeJoin Channel=PJSIP/203-0000000d")+1] {
		clk.Observe(m)
		e.Apply(m)
	}
	if s := e.Publish(); len(s.Conferences["1000"].Users) != 3 {
		t.Fatalf("before the outage: %s", s.ConferencesJSON())
	}
	e.SetLink(LinkDown)
	e.Publish()
	e.BeginResync()
	e.EndResync() // CoreShowChannels listed nothing; ConfbridgeListRooms answered "No active conferences."
	s := e.Publish()
	if len(s.Conferences) != 0 || string(s.ConferencesJSON()) != "{}" {
		t.Errorf("conferences after the resync: %s", s.ConferencesJSON())
	}
	if n := len(s.Extensions.Get("201").Conversations); n != 0 {
		t.Errorf("201 still has %d conversations", n)
	}
}

// TestConferenceResyncLists: a resync runs while the phones join; the
// recorded ConfbridgeListRooms (locked) and ConfbridgeList (201 and 202
// only, after Carol was kicked) answers confirm the room: it is locked and
// Carol is no member.
func TestConferenceResyncLists(t *testing.T) {
	rec := loadRecording(t, "confbridge_actions")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.BeginResync()
	apply := func(ms ...ami.Message) {
		for _, m := range ms {
			clk.Observe(m)
			e.Apply(m)
		}
	}
	apply(rec.msgs[:msgIndex(t, rec, "ConfbridgeJoin Channel=PJSIP/203-0000000d")+1]...)
	rooms := rec.msgs[msgIndex(t, rec, "ConfbridgeListRooms ActionID=confbridgelistrooms-8")]
	list := msgIndex(t, rec, "Success ActionID=confbridgelist-10")
	apply(rooms)
	apply(rec.msgs[list+1 : list+4]...)
	apply(rooms) // twice: one follow-up all the same
	var lists []string
	for _, a := range e.Followups(FollowResync) {
		if a.Action() == "ConfbridgeList" {
			lists = append(lists, a.Get("Conference"))
		}
	}
	if len(lists) != 1 || lists[0] != "1000" {
		t.Errorf("ConfbridgeList follow-ups for rooms %v, want [1000]", lists)
	}
	e.EndResync()
	s := e.Publish()
	c, ok := s.Conferences["1000"]
	if !ok || !c.Locked {
		t.Fatalf("room 1000 after the resync: %s", s.ConferencesJSON())
	}
	if got := confUsers(s, "1000"); len(got) != 2 || !got["201"] || !got["202"] {
		t.Errorf("members %v, want 201 and 202", got)
	}
	for _, cv := range s.Extensions.Get("203").Conversations {
		if cv.InConference {
			t.Errorf("203 still in conference: %+v", cv)
		}
	}
	if s.Stale {
		t.Error("still stale after EndResync")
	}
}

// TestConferenceLateRoomList: the confbridge_actions recording's first
// ConfbridgeListRooms answer (room 1000, three parties) applied after the
// room ended does not bring it back.
func TestConferenceLateRoomList(t *testing.T) {
	rec := loadRecording(t, "confbridge_actions")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs {
		clk.Observe(m)
		e.Apply(m)
	}
	e.Apply(rec.msgs[msgIndex(t, rec, "ConfbridgeListRooms ActionID=confbridgelistrooms-2")])
	if s := e.Publish(); len(s.Conferences) != 0 {
		t.Errorf("conferences: %s", s.ConferencesJSON())
	}
}

// TestConferenceRefresh: while a room is in use, the periodic refresh
// re-reads the room list (a lock raises no event in Asterisk 22), and an
// answer that says it is locked shows; with no room, nothing is asked.
func TestConferenceRefresh(t *testing.T) {
	rec := loadRecording(t, "confbridge_actions")
	var clk StreamClock
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	asks := func() (n int) {
		for _, a := range e.Followups(FollowRefresh) {
			if a.Action() == "ConfbridgeListRooms" {
				n++
			}
		}
		return n
	}
	if n := asks(); n != 0 {
		t.Errorf("no room in use: %d ConfbridgeListRooms", n)
	}
	for _, m := range rec.msgs[:msgIndex(t, rec, "ConfbridgeJoin Channel=PJSIP/203-0000000d")+1] {
		clk.Observe(m)
		e.Apply(m)
	}
	if n := asks(); n != 1 {
		t.Errorf("room 1000 in use: %d ConfbridgeListRooms, want 1", n)
	}
	e.Apply(rec.msgs[msgIndex(t, rec, "ConfbridgeListRooms ActionID=confbridgelistrooms-8")]) // Locked: Yes
	if s := e.Publish(); !s.Conferences["1000"].Locked {
		t.Errorf("after the refresh's answer: %s", s.ConferencesJSON())
	}
}
