package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// TestPresenceEveryTransition sets every presence from every presence on
// the simulated PBX, which answers AstDB actions as Asterisk 22 does (a
// DBDel of a key that is not there is refused): each change answers 200
// and the presence read back is the one asked for. Turning off what is
// off (DND, an unset forward) is part of most changes.
func TestPresenceEveryTransition(t *testing.T) {
	hash, err := auth.HashPassword("pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveTwoPBXs(t, "users:\n"+
		"  - {username: ada, name: Ada Lovelace, cellphone: \"3331234567\", password_hash: \""+hash+"\", endpoints: [\"201\"]}\n")
	ada := login(t, srv.base, "ada", "pw")
	bodies := map[string]string{
		"online":      `{"status":"online"}`,
		"dnd":         `{"status":"dnd"}`,
		"voicemail":   `{"status":"voicemail"}`,
		"cellphone":   `{"status":"cellphone"}`,
		"callforward": `{"status":"callforward","to":"202"}`,
	}
	set := func(status string) {
		t.Helper()
		if code, body := ada.do("POST", "/user/presence", bodies[status]); code != http.StatusOK {
			t.Fatalf("presence %s: %d %s", status, code, body)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, body := ada.do("GET", "/user/presence", "")
			var p struct{ Status string }
			json.Unmarshal([]byte(body), &p)
			if p.Status == status {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("presence reads %s, want %s", body, status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	states := []string{"online", "dnd", "voicemail", "cellphone", "callforward"}
	for _, from := range states {
		for _, to := range states {
			set(from)
			set(to)
		}
	}
}
