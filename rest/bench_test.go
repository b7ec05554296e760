package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// nopWriter is the cheapest ResponseWriter, so that a benchmark measures
// the handler's own allocations and not a recorder's.
type nopWriter struct {
	h      http.Header
	n      int
	status int
}

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *nopWriter) WriteHeader(s int)           { w.status = s }

// readOnce sets up a handler and returns a function serving one request
// into a reused writer, and the writer.
func readOnce(tb testing.TB, exts int, user, path string, hdr ...string) (func(), *nopWriter) {
	eng := resttest.Engine(resttest.Options{Extensions: exts, InCall: 30})
	svc := auth.NewService(testUsers(tb), auth.Config{})
	tok, _, _ := svc.Tokens().Issue(user)
	h, err := newHandler(Config{Auth: svc, State: eng, Metrics: NewMetrics(), AccessLogEvery: -1})
	if err != nil {
		tb.Fatal(err)
	}
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // warm the per-version cache
	if w.status != 200 && w.status != 304 {
		tb.Fatalf("status %d", w.status)
	}
	return func() {
		clear(w.h)
		w.n = 0
		h.ServeHTTP(w, req)
	}, w
}

func benchRead(b *testing.B, exts int, user, path string, hdr ...string) {
	serve, w := readOnce(b, exts, user, path, hdr...)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serve()
	}
	b.SetBytes(int64(w.n))
}

func BenchmarkExtensions100(b *testing.B) { benchRead(b, 100, "root", "/astproxy/extensions") }
func BenchmarkExtensions500(b *testing.B) { benchRead(b, 500, "root", "/astproxy/extensions") }
func BenchmarkExtensions100Gzip(b *testing.B) {
	benchRead(b, 100, "root", "/astproxy/extensions", "Accept-Encoding", "gzip, deflate, br")
}
func BenchmarkExtensions100NotModified(b *testing.B) {
	benchRead(b, 100, "root", "/astproxy/extensions", "If-None-Match", `W/"1"`)
}
func BenchmarkExtensions100Filtered(b *testing.B) { benchRead(b, 100, "alice", "/astproxy/extensions") }
func BenchmarkExtension(b *testing.B)             { benchRead(b, 100, "alice", "/astproxy/extension/2002") }
func BenchmarkStatus(b *testing.B)                { benchRead(b, 100, "root", "/astproxy/status") }

// TestReadsDoNotAllocate holds the fast path to zero allocations per
// request (beyond what net/http itself needs).
func TestReadsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, c := range []struct {
		name, user, path string
		hdr              []string
	}{
		{"extensions", "root", "/astproxy/extensions", nil},
		{"gzip", "root", "/astproxy/extensions", []string{"Accept-Encoding", "gzip"}},
		{"304", "root", "/astproxy/extensions", []string{"If-None-Match", `W/"1"`}},
		{"filtered", "alice", "/astproxy/extensions", nil},
		{"status", "bob", "/astproxy/status", nil},
		{"queues", "alice", "/astproxy/queues", nil},
		{"filtered gzip", "alice", "/astproxy/extensions", []string{"Accept-Encoding", "gzip"}},
		{"filtered parkings", "bob", "/astproxy/parkings", nil},
		{"filtered trunks", "bob", "/astproxy/trunks", nil},
	} {
		serve, _ := readOnce(t, 100, c.user, c.path, c.hdr...)
		if a := testing.AllocsPerRun(1000, serve); a != 0 {
			t.Errorf("%s: %v allocations per request", c.name, a)
		}
	}
}
