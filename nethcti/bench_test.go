package nethcti

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest"
)

// discard is a ResponseWriter that keeps nothing.
type discard struct {
	h http.Header
	n int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }

// benchReads builds the recorded state with 300 more (idle) extensions
// and returns the native handler, the front and a user's credentials.
func benchReads(b testing.TB) (native, front http.Handler, nativeTok, jwt string) {
	names := map[string]string{}
	for i := range 300 {
		names[strconv.Itoa(3000+i)] = "Extension " + strconv.Itoa(3000+i)
	}
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}, Names: names})
	eng.Publish()
	for _, m := range recordedMessages(b) {
		eng.Apply(m)
	}
	eng.Publish()
	svc := auth.NewService(testUsers(b), auth.Config{})
	api, err := rest.NewHandler(rest.Config{Auth: svc, State: engineState{eng}, AccessLogEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	fr, err := New(Config{Auth: svc, API: api, State: engineState{eng}, Secret: testSecret})
	if err != nil {
		b.Fatal(err)
	}
	nativeTok, _, _ = svc.Tokens().Issue("carol")
	sess, err := svc.Login("carol", "secret", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	jwt, err = fr.keys.sign(claims{ID: "carol", Session: fr.keys.sealText(sess.Token)})
	if err != nil {
		b.Fatal(err)
	}
	return api, fr, nativeTok, jwt
}

func benchRead(b *testing.B, h http.Handler, path, authz string) {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", authz)
	d := &discard{h: http.Header{}}
	h.ServeHTTP(d, req)
	if d.n < 10000 {
		b.Fatalf("%s: %d bytes", path, d.n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(d.h)
		h.ServeHTTP(d, req)
	}
}

// BenchmarkExtensionsNative is the native read of all extensions by a
// user who sees some calls hidden (carol), in process.
func BenchmarkExtensionsNative(b *testing.B) {
	api, _, tok, _ := benchReads(b)
	benchRead(b, api, "/astproxy/extensions", "Bearer "+tok)
}

// BenchmarkExtensionsFront is the same read through the front, with
// usernames, by the same user with a login JWT. Target: at least 0.9 of
// BenchmarkExtensionsNative's throughput.
func BenchmarkExtensionsFront(b *testing.B) {
	_, fr, _, jwt := benchReads(b)
	benchRead(b, fr, "/api/astproxy/extensions", "Bearer "+jwt)
}

// TestExtensionsReadAllocs: a read from the front's cache allocates
// nothing, as the native read.
func TestExtensionsReadAllocs(t *testing.T) {
	_, fr, _, jwt := benchReads(t)
	req := httptest.NewRequest("GET", "/api/astproxy/extensions", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	d := &discard{h: http.Header{}}
	fr.ServeHTTP(d, req)
	if n := testing.AllocsPerRun(100, func() { clear(d.h); fr.ServeHTTP(d, req) }); n != 0 {
		t.Errorf("%v allocations a read, want 0", n)
	}
}
