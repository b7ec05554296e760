package ws

import (
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestPresenceTopic: userPresenceUpdate goes to clients of topic
// "presence" (every user: presence is never hidden), whose snapshot
// carries every extension's presence; others do not get it.
func TestPresenceTopic(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	e.apply(devState("201", false), devState("202", false))
	p := e.dial("bob")
	expectOp(t, p, "hello")
	p.Subscribe("presence")
	raw, err := p.ReadRaw()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); !strings.Contains(got, `"op":"snapshot"`) || !strings.Contains(got, `"presence":{"201":"online","202":"online"}`) {
		t.Errorf("snapshot without the presence collection: %s", got)
	}
	x := e.dial("bob")
	expectOp(t, x, "hello")
	x.Subscribe("extensions")
	expectOp(t, x, "snapshot")

	e.apply(event("DBGetResponse", "Family", "DND", "Key", "201", "Val", "YES"))
	ev := next(t, p)
	if ev.Type != "userPresenceUpdate" || string(ev.Data) != `{"exten":"201","status":"dnd"}` {
		t.Errorf("presence client got %s %s", ev.Type, ev.Data)
	}
	if ev := next(t, x); ev.Type != "extenUpdate" {
		t.Errorf("extensions client got %s", ev.Type)
	}
	// The phone's own states come with extenUpdate, not as presence.
	e.apply(devState("202", true))
	e.apply(event("DBGetResponse", "Family", "CF", "Key", "202", "Val", "vmu202"))
	if ev := next(t, p); string(ev.Data) != `{"exten":"202","status":"voicemail"}` {
		t.Errorf("presence client got %s %s", ev.Type, ev.Data)
	}
}
