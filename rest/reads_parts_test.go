package rest

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// churnHandler is a handler over a synthetic engine of exts extensions
// (inCall of them in calls) and a function applying and publishing the
// next change.
func churnHandler(tb testing.TB, exts, inCall int) (http.Handler, string, func() *calls.Snapshot) {
	o := resttest.Options{Extensions: exts, InCall: inCall}
	eng := resttest.Engine(o)
	svc := auth.NewService(testUsers(tb), auth.Config{})
	tok, _, _ := svc.Tokens().Issue("root")
	h, err := newHandler(Config{Auth: svc, State: eng, Metrics: NewMetrics(), AccessLogEvery: -1})
	if err != nil {
		tb.Fatal(err)
	}
	i := 0
	return h, tok, func() *calls.Snapshot {
		eng.Apply(resttest.Churn(o, i))
		i++
		return eng.Publish()
	}
}

// TestExtensionsInPiecesAcrossChanges reads the collection, written in
// pieces, after each of a series of changes: the body is the snapshot's
// JSON with an exact Content-Length, plain and gzipped.
func TestExtensionsInPiecesAcrossChanges(t *testing.T) {
	h, tok, change := churnHandler(t, 1000, 300)
	for round := range 12 {
		s := change()
		for _, enc := range []string{"", "gzip"} {
			req := httptest.NewRequest("GET", "/astproxy/extensions", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if enc != "" {
				req.Header.Set("Accept-Encoding", enc)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body := w.Body.Bytes()
			if w.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Fatalf("round %d %q: Content-Length %s, body %d bytes", round, enc, w.Header().Get("Content-Length"), len(body))
			}
			if enc != "" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(zr)
			}
			if !bytes.Equal(body, s.ExtensionsJSON()) || w.Header().Get("Etag") != `W/"`+strconv.FormatUint(s.Version, 10)+`"` {
				t.Fatalf("round %d %q: %d bytes, etag %s, want version %d", round, enc, len(body), w.Header().Get("Etag"), s.Version)
			}
		}
	}
}

// BenchmarkExtensions5000AfterChange is the first read of all 5,000
// extensions (2,000 calls up) after one change: the new version's cache
// and the piece the change re-encoded.
func BenchmarkExtensions5000AfterChange(b *testing.B) {
	h, tok, change := churnHandler(b, 5000, 4000)
	req := httptest.NewRequest("GET", "/astproxy/extensions", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		change()
		clear(w.h)
		w.n = 0
		b.StartTimer()
		h.ServeHTTP(w, req)
	}
	b.SetBytes(int64(w.n))
}

// BenchmarkExtensions5000 is a read of all 5,000 extensions (2,000 calls
// up) with no change since the last read.
func BenchmarkExtensions5000(b *testing.B) {
	benchRead(b, 5000, "root", "/astproxy/extensions")
}
