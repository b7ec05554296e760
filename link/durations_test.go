package link_test

import (
	"testing"
	"time"
)

// TestDurationsTick: while a call is up and nothing happens on the PBX,
// the link has the engine re-encode its duration about once a second
// (that no change goes to the feed is calls' TestRefreshDurations).
func TestDurationsTick(t *testing.T) {
	h := start(t)
	waitFor(t, h.eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	bridged := 0
	for _, m := range recording(t, "basic_call_caller_hangup.ami") {
		h.srv.Broadcast(m)
		if m.Event() == "BridgeEnter" {
			if bridged++; bridged == 2 {
				break
			}
		}
	}
	waitFor(t, h.eng, "201 in a connected call", func(s state) bool {
		for _, c := range s.Extensions["201"].Conversations {
			return c["connected"] == true
		}
		return false
	})
	// Generous: the tick is 1 s, the wait allows for a loaded machine.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var d float64
		for _, c := range decode(t, h.eng.Snapshot()).Extensions["201"].Conversations {
			d, _ = c["duration"].(float64)
		}
		if d >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("duration still %v after 20 s of a quiet call", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
