package rest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/rest/internal/synth"
)

// A read while calls are up carries the duration of the engine's last
// refresh, with a new ETag: a client holding the previous version gets the
// new body, not a 304 with a frozen duration.
func TestReadDurationsFresh(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(1796028600000)
	eng := synth.Engine(synth.Options{Extensions: 4, InCall: 2, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	f := newFixture(t, false, func(c *Config) { c.State = eng })
	r1 := f.do("GET", "/astproxy/extension/2000", "root", "")
	if r1.status != 200 || !bytes.Contains(r1.body, []byte(`"answeredAt":`)) {
		t.Fatalf("extension 2000: %d %s", r1.status, r1.body)
	}
	mu.Lock()
	now = now.Add(7 * time.Second)
	mu.Unlock()
	eng.RefreshDurations()
	r2 := f.do("GET", "/astproxy/extension/2000", "root", "", "If-None-Match", r1.header.Get("Etag"))
	if r2.status != 200 || !bytes.Contains(r2.body, []byte(`"duration":7`)) {
		t.Errorf("after 7 s: %d %s", r2.status, r2.body)
	}
	r3 := f.do("GET", "/astproxy/extensions", "alice", "")
	if !bytes.Contains(r3.body, []byte(`"duration":7`)) {
		t.Errorf("filtered collection after 7 s: %s", r3.body)
	}
}
