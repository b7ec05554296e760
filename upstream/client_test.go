package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a real local HTTP server whose behaviour a test switches.
type server struct {
	*httptest.Server
	hits  atomic.Int64
	mode  atomic.Value // "ok", "fail" (503), "reset" (connection closed), "stall"
	conns atomic.Int64 // connections accepted
	hold  chan struct{}
}

func newServer(t *testing.T, name string) *server {
	t.Helper()
	s := &server{hold: make(chan struct{})}
	s.mode.Store("ok")
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch s.mode.Load().(string) {
		case "fail":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case "reset":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		case "stall":
			select {
			case <-r.Context().Done():
			case <-s.hold:
			}
			return
		case "hold":
			<-s.hold
		case "stallbody":
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-s.hold:
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s user=%s", name, r.Method, r.URL.RequestURI(), body, r.Header.Get("X-User"))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(func() {
		select {
		case <-s.hold:
		default:
			close(s.hold)
		}
		s.Close()
	})
	return s
}

func newClient(t *testing.T, cfg Config, servers ...*server) *Client {
	t.Helper()
	for _, s := range servers {
		cfg.URLs = append(cfg.URLs, s.URL+"/api")
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// call sends one request and returns the status and body ("" and the
// error when it failed).
func call(c *Client, method, path, body string) (int, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, path, rd)
	req.Header.Set("X-User", "alice")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestForwardsPathQueryAndHeaders(t *testing.T) {
	a := newServer(t, "a")
	c := newClient(t, Config{}, a)
	code, body, err := call(c, "POST", "/phonebook/search/a%2Fb?limit=2", "x")
	if err != nil || code != 200 || body != "a POST /api/phonebook/search/a%2Fb?limit=2 x user=alice" {
		t.Fatalf("%d %q %v", code, body, err)
	}
	req, _ := http.NewRequest("GET", "http://elsewhere/x", nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("an absolute URL was accepted")
	}
}

func TestEjectAndReadmit(t *testing.T) {
	a, b := newServer(t, "a"), newServer(t, "b")
	c := newClient(t, Config{EjectAfter: 2, EjectFor: 200 * time.Millisecond, Retries: -1}, a, b)
	a.mode.Store("fail")
	// Sequential requests tie on outstanding (0), so a is tried until
	// it has failed twice.
	fails := 0
	for range 10 {
		code, _, err := call(c, "GET", "/x", "")
		if err != nil {
			t.Fatal(err)
		}
		if code == 503 {
			fails++
		}
	}
	if fails != 2 || a.hits.Load() != 2 || b.hits.Load() != 8 || !c.Stats()[0].Ejected {
		t.Fatalf("fails %d, hits a %d b %d, stats %+v", fails, a.hits.Load(), b.hits.Load(), c.Stats())
	}
	// Back after EjectFor; it recovered, so it stays.
	a.mode.Store("ok")
	time.Sleep(250 * time.Millisecond)
	for range 4 {
		if code, _, err := call(c, "GET", "/x", ""); err != nil || code != 200 {
			t.Fatal(code, err)
		}
	}
	if a.hits.Load() != 6 || c.Stats()[0].Ejected || c.Stats()[0].Failures != 0 {
		t.Fatalf("after re-admission: hits a %d, stats %+v", a.hits.Load(), c.Stats())
	}
	// Re-admitted while still failing: one failure ejects it again.
	a.mode.Store("fail")
	c.done(c.pick(nil), true)
	c.done(c.pick(nil), true)
	time.Sleep(250 * time.Millisecond)
	if code, _, _ := call(c, "GET", "/x", ""); code != 503 || !c.Stats()[0].Ejected {
		t.Fatalf("%d %+v", code, c.Stats())
	}
}

func TestRetryOnlyIdempotent(t *testing.T) {
	for _, mode := range []string{"fail", "reset"} {
		t.Run(mode, func(t *testing.T) {
			a, b := newServer(t, "a"), newServer(t, "b")
			c := newClient(t, Config{EjectAfter: 100}, a, b)
			a.mode.Store(mode)
			// POST goes to a (tie: first) and is not retried.
			code, _, err := call(c, "POST", "/create", "body")
			if (mode == "fail" && (err != nil || code != 503)) || (mode == "reset" && err == nil) || b.hits.Load() != 0 {
				t.Fatalf("POST: %d %v, b hits %d", code, err, b.hits.Load())
			}
			// GET and PUT (with a replayable body) are retried on b.
			for _, m := range []string{"GET", "PUT"} {
				a.hits.Store(0)
				code, body, err := call(c, m, "/x", "again")
				if err != nil || code != 200 || !strings.HasPrefix(body, "b "+m) || a.hits.Load() != 1 {
					t.Fatalf("%s: %d %q %v, a hits %d", m, code, body, err, a.hits.Load())
				}
				if m == "PUT" && !strings.Contains(body, "again") {
					t.Fatalf("body not replayed: %q", body)
				}
			}
			// A body that cannot be replayed is not retried.
			req, _ := http.NewRequest("PUT", "/x", io.NopCloser(strings.NewReader("stream")))
			b.hits.Store(0)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if b.hits.Load() != 0 {
				t.Fatal("a streamed body was retried")
			}
		})
	}
	t.Run("all down", func(t *testing.T) {
		a := newServer(t, "a")
		c := newClient(t, Config{Retries: 3, EjectAfter: 100}, a)
		a.mode.Store("fail")
		if code, _, err := call(c, "GET", "/x", ""); err != nil || code != 503 || a.hits.Load() != 4 {
			t.Fatalf("%d %v, hits %d", code, err, a.hits.Load())
		}
	})
}

func TestStalledUpstream(t *testing.T) {
	a, b := newServer(t, "a"), newServer(t, "b")
	// Timeout (headers) is long enough for a loaded machine to send a's
	// headers in the stallbody case below: with 100 ms it sometimes did
	// not, the GET was retried on b and succeeded. ReadTimeout (the body)
	// can stay short, a stalled body never ends.
	c := newClient(t, Config{Timeout: time.Second, ReadTimeout: 100 * time.Millisecond, EjectAfter: 100}, a, b)
	a.mode.Store("stall")
	start := time.Now()
	code, body, err := call(c, "GET", "/x", "")
	if err != nil || code != 200 || !strings.HasPrefix(body, "b ") {
		t.Fatalf("%d %q %v", code, body, err)
	}
	// At least the 1 s Timeout on a; at most a retry's worth, with room for
	// a loaded machine.
	if d := time.Since(start); d < time.Second || d > 6*time.Second {
		t.Fatalf("took %v", d)
	}
	// A POST to the stalled server times out, without retry.
	b.hits.Store(0)
	if _, _, err := call(c, "POST", "/x", "p"); err == nil || b.hits.Load() != 0 {
		t.Fatalf("POST: %v, b hits %d", err, b.hits.Load())
	}
	// A body that stalls after the headers is cut by ReadTimeout and
	// counts as a failure.
	a.mode.Store("stallbody")
	start = time.Now()
	_, _, err = call(c, "GET", "/y", "")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled body: %v after %v", err, time.Since(start))
	}
	if st := c.Stats()[0]; st.Failures == 0 || st.Outstanding != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The caller's deadline wins over retries.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.mode.Store("stall")
	b.mode.Store("stall")
	req, _ := http.NewRequestWithContext(ctx, "GET", "/z", nil)
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller deadline: %v", err)
	}
}

func TestLeastOutstanding(t *testing.T) {
	a, b := newServer(t, "a"), newServer(t, "b")
	c := newClient(t, Config{}, a, b)
	a.mode.Store("hold")
	// The first request ties (0, 0) and goes to a, where it waits.
	done := make(chan error)
	go func() {
		_, _, err := call(c, "GET", "/held", "")
		done <- err
	}()
	for a.hits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if st := c.Stats(); st[0].Outstanding != 1 || st[1].Outstanding != 0 {
		t.Fatalf("%+v", st)
	}
	for range 5 {
		if code, body, err := call(c, "GET", "/x", ""); err != nil || code != 200 || !strings.HasPrefix(body, "b ") {
			t.Fatalf("%d %q %v", code, body, err)
		}
	}
	// An open response body still counts.
	req, _ := http.NewRequest("GET", "/open", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st[0].Outstanding != 1 || st[1].Outstanding != 1 {
		t.Fatalf("%+v", st)
	}
	resp.Body.Close()
	close(a.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st[0].Outstanding != 0 || st[1].Outstanding != 0 || a.hits.Load() != 1 {
		t.Fatalf("%+v, a hits %d", st, a.hits.Load())
	}
}

func TestPooledConnections(t *testing.T) {
	a := newServer(t, "a")
	c := newClient(t, Config{MaxConnsPerHost: 2}, a)
	for range 20 {
		if _, _, err := call(c, "GET", "/x", ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.conns.Load(); n != 1 {
		t.Fatalf("20 sequential requests used %d connections", n)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, _, err := call(c, "GET", "/x", ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := a.conns.Load(); n > 2 {
		t.Fatalf("%d connections with MaxConnsPerHost 2", n)
	}
}

func TestStaticHeader(t *testing.T) {
	var got atomic.Value
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(401)
	}))
	defer s.Close()
	c, _ := New(Config{URLs: []string{s.URL}, Credentials: StaticHeader("Authorization", "Bearer secret")})
	req, _ := http.NewRequest("POST", "/x", strings.NewReader("b"))
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 401 || got.Load() != "Bearer secret" {
		t.Fatalf("%v %v %v", resp, err, got.Load())
	}
	resp.Body.Close()
}

// TestOAuth2 checks that a token is fetched once and shared, renewed
// before it expires and after a 401, and that a POST refused with 401 is
// sent again with the new token.
func TestOAuth2(t *testing.T) {
	var issued atomic.Int64
	var valid atomic.Value // the token the API accepts
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if r.Method != "POST" || id != "ctib" || secret != "s3cret" || r.FormValue("grant_type") != "client_credentials" || r.FormValue("scope") != "pb history" {
			http.Error(w, `{"error":"invalid_client"}`, 401)
			return
		}
		n := issued.Add(1)
		tok := fmt.Sprintf("tok-%d", n)
		valid.Store(tok)
		time.Sleep(20 * time.Millisecond) // let concurrent requests pile up
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
	}))
	defer tokens.Close()
	var apiHits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiHits.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+valid.Load().(string) {
			w.WriteHeader(401)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %s", b)
	}))
	defer api.Close()
	o, err := NewOAuth2(OAuth2Config{TokenURL: tokens.URL, ClientID: "ctib", ClientSecret: "s3cret", Scopes: []string{"pb", "history"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Now()
	o.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	c, _ := New(Config{URLs: []string{api.URL}, Credentials: o})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if code, body, err := call(c, "GET", "/x", ""); err != nil || code != 200 || body != "ok " {
				t.Errorf("%d %q %v", code, body, err)
			}
		})
	}
	wg.Wait()
	if issued.Load() != 1 {
		t.Fatalf("10 concurrent requests fetched %d tokens", issued.Load())
	}
	// Near expiry (1 h minus the 30 s leeway) a new one is fetched.
	mu.Lock()
	clock = clock.Add(time.Hour - 29*time.Second)
	mu.Unlock()
	if code, _, _ := call(c, "GET", "/x", ""); code != 200 || issued.Load() != 2 {
		t.Fatalf("after expiry: %d, issued %d", code, issued.Load())
	}
	// The server revokes the token: the 401 renews it, and the POST is
	// sent again (it was refused, not acted on).
	valid.Store("rotated")
	apiHits.Store(0)
	code, body, err := call(c, "POST", "/create", "payload")
	if err != nil || code != 200 || body != "ok payload" || issued.Load() != 3 || apiHits.Load() != 2 {
		t.Fatalf("after revocation: %d %q %v, issued %d, api hits %d", code, body, err, issued.Load(), apiHits.Load())
	}
	// A token endpoint that refuses us: the request fails, no loop.
	bad, _ := NewOAuth2(OAuth2Config{TokenURL: tokens.URL, ClientID: "ctib", ClientSecret: "wrong"})
	c2, _ := New(Config{URLs: []string{api.URL}, Credentials: bad, Retries: -1})
	if _, _, err := call(c2, "GET", "/x", ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad client secret: %v", err)
	}
}

// TestSleepBackoff: the wait is bounded by base<<(n-1) and by limit, even
// for a retry count whose shift would overflow, and ends with ctx.
func TestSleepBackoff(t *testing.T) {
	for _, n := range []int{0, 1, 5, 40, 100} {
		start := time.Now()
		if err := SleepBackoff(context.Background(), time.Millisecond, 5*time.Millisecond, n); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 2*time.Second { // far above 5 ms: only a wrong bound takes this long
			t.Errorf("n=%d waited %v", n, d)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepBackoff(ctx, time.Hour, time.Hour, 3); err == nil {
		t.Error("a cancelled context did not end the wait")
	}
}
