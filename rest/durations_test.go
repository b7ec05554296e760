package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"

	"bytes"
	"github.com/ctibridge/ctibridge/auth"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/rest/resttest"
)

// A read while calls are up carries the duration of the engine's last
// refresh, with a new ETag: a client holding the previous version gets the
// new body, not a 304 with a frozen duration.
func TestReadDurationsFresh(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(1796028600000)
	eng := resttest.Engine(resttest.Options{Extensions: 4, InCall: 2, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
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

// BenchmarkFirstReadAfterRefresh: 1,000 extensions, all in a call (500
// calls), re-encoded by the once-a-second duration refresh; one op is the
// refresh and the first read of the new version by each user (who pays for
// the version's cache entry: nothing to build for root, a filtered view
// for each of the others, whose view keys differ).
func BenchmarkFirstReadAfterRefresh(b *testing.B) {
	for _, users := range [][]string{{"root"}, {"alice"}, {"alice", "bob", "olga"}} {
		b.Run(strings.Join(users, "+"), func(b *testing.B) {
			now := time.UnixMilli(1796028600000)
			eng := resttest.Engine(resttest.Options{Extensions: 1000, InCall: 1000, Now: func() time.Time { return now }})
			svc := auth.NewService(testUsers(b), auth.Config{})
			h, err := newHandler(Config{Auth: svc, State: eng, Metrics: NewMetrics(), AccessLogEvery: -1})
			if err != nil {
				b.Fatal(err)
			}
			var reqs []*http.Request
			for _, u := range users {
				tok, _, _ := svc.Tokens().Issue(u)
				req := httptest.NewRequest("GET", "/astproxy/extensions", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				reqs = append(reqs, req)
			}
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				eng.RefreshDurations()
				for _, req := range reqs {
					clear(w.h)
					h.ServeHTTP(w, req)
				}
			}
		})
	}
}
