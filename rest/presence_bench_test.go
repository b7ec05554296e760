package rest

import "testing"

func BenchmarkPresence(b *testing.B)          { benchRead(b, 100, "alice", "/user/presence") }
func BenchmarkVoicemailCounters(b *testing.B) { benchRead(b, 100, "root", "/voicemail/new_counters") }

// TestPresenceReadsDoNotAllocate: GET user/presence answers one of a few
// bodies made once; new_counters is made once per state version.
func TestPresenceReadsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, path := range []string{"/user/presence", "/voicemail/new_counters"} {
		serve, _ := readOnce(t, 100, "alice", path)
		if a := testing.AllocsPerRun(1000, serve); a != 0 {
			t.Errorf("%s: %v allocations per request", path, a)
		}
	}
}
