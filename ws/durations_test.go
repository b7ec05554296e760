package ws

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// A client connecting while a call is up gets its snapshot with the
// duration of the engine's last refresh, in full and redacted (the refresh
// is no event: the hub's redaction follows the snapshot's new bytes).
func TestSnapshotDurationsFresh(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1796028681, 0)
	e := newEnv(t, calls.Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}, auth.Config{}, Config{})
	msgs := loadRecording(t, "inbound_trunk_did")
	bridged := 0
	for _, m := range msgs {
		e.eng.Apply(m)
		if m.Event() == "BridgeEnter" {
			if bridged++; bridged == 2 {
				break
			}
		}
	}
	e.eng.Publish()
	for _, user := range []string{"root", "alice"} {
		c := e.dial(user)
		expectOp(t, c, "hello")
		c.Subscribe("extensions")
		expectOp(t, c, "snapshot")
	}
	mu.Lock()
	now = now.Add(9 * time.Second)
	mu.Unlock()
	e.eng.RefreshDurations()
	for _, user := range []string{"root", "alice"} {
		c := e.dial(user)
		expectOp(t, c, "hello")
		c.Subscribe("extensions")
		s := expectOp(t, c, "snapshot")
		if !bytes.Contains(s.Extensions, []byte(`"duration":9`)) {
			t.Errorf("%s's snapshot 9 s into the call: %s", user, s.Extensions)
		}
	}
}
