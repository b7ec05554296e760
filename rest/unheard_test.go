package rest

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctibridge/ctibridge/calls"
)

// unheardState is the engine as a bus node that cannot hear its op
// stream serves it (package bus: State), while on.
type unheardState struct {
	State
	on *atomic.Bool
}

func (u unheardState) Snapshot() *calls.Snapshot {
	if u.on.Load() {
		return u.State.Snapshot().AsUnheard(1)
	}
	return u.State.Snapshot()
}

// TestReadsUnheard: a snapshot a node says is stale on its own is read
// stale (X-Ctibridge-Stale, /status stalled) at the same version, under
// an ETag of its own: a client's cached live copy is not answered 304.
func TestReadsUnheard(t *testing.T) {
	var on atomic.Bool
	f := newFixture(t, false, func(c *Config) { c.State = unheardState{State: c.State, on: &on} })
	live := f.do("GET", "/astproxy/status", "root", "")
	if live.status != 200 || live.header.Get("X-Ctibridge-Stale") != "" {
		t.Fatalf("live: %d %v", live.status, live.header)
	}
	on.Store(true)
	r := f.do("GET", "/astproxy/status", "root", "", "If-None-Match", live.header.Get("Etag"))
	if r.status != 200 || r.header.Get("X-Ctibridge-Stale") != "true" || !strings.Contains(string(r.body), `"pbx":"stalled"`) ||
		r.header.Get("Etag") == live.header.Get("Etag") {
		t.Fatalf("unheard, with the live ETag: %d %v %s", r.status, r.header, r.body)
	}
	if r2 := f.do("GET", "/astproxy/extensions", "root", ""); r2.header.Get("X-Ctibridge-Stale") != "true" {
		t.Errorf("unheard extensions: %v", r2.header)
	}
	on.Store(false)
	if r := f.do("GET", "/astproxy/status", "root", "", "If-None-Match", live.header.Get("Etag")); r.status != 304 {
		t.Errorf("heard again, the live ETag: %d", r.status)
	}
}
