package webhook

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

const testSecret = "0123456789abcdef-test-secret"

// got is one POST a receiver took.
type got struct {
	ID, Type string
	Event    Event
}

// receiver is a real HTTP receiver: it checks every POST's signature
// and answers as its mode says.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	addr string

	mu       sync.Mutex
	mode     string // "ok", "fail" (503), "stall" (never answers until released)
	token    string // when set, the bearer token every POST must carry
	acked    []got  // answered 2xx, in order
	attempts int
	badSig   int
	release  chan struct{}
	arrived  chan struct{} // a request arrived (capacity 1)
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, mode: "ok", release: make(chan struct{}), arrived: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(r)
	r.addr = r.srv.Listener.Addr().String()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *receiver) URL() string { return r.srv.URL + "/hook?tenant=a" }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.attempts++
	mode, release, token := r.mode, r.release, r.token
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	switch mode {
	case "fail":
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	case "stall":
		select {
		case <-release:
		case <-req.Context().Done():
			return
		}
	}
	if token != "" && req.Header.Get("Authorization") != "Bearer "+token {
		r.t.Errorf("POST without the token: %q", req.Header.Get("Authorization"))
		http.Error(w, "who are you", http.StatusUnauthorized)
		return
	}
	err := Verify(testSecret, req.Header.Get(HeaderSignature), req.Header.Get(HeaderTimestamp), body, time.Now(), 5*time.Minute)
	var e Event
	if err == nil {
		err = json.Unmarshal(body, &e)
	}
	if err != nil || req.URL.Path != "/hook" || req.URL.Query().Get("tenant") != "a" ||
		req.Header.Get(HeaderID) != e.ID || req.Header.Get(HeaderEvent) != e.Type {
		r.mu.Lock()
		r.badSig++
		r.mu.Unlock()
		r.t.Errorf("bad POST %s %s: %v", req.URL, body, err)
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.acked = append(r.acked, got{ID: e.ID, Type: e.Type, Event: e})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode == "stall" && m != "stall" {
		close(r.release)
		r.release = make(chan struct{})
	}
	r.mode = m
}

// stop takes the receiver down: connections refused.
func (r *receiver) stop() {
	r.setMode("ok") // release stalled handlers
	r.srv.CloseClientConnections()
	r.srv.Close()
}

// restart brings it back on the same address.
func (r *receiver) restart() {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(r)
	r.srv.Listener.Close()
	r.srv.Listener = ln
	r.srv.Start()
}

func (r *receiver) got() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]got(nil), r.acked...)
}

// waitFor waits until the receiver has acknowledged n events.
func (r *receiver) waitFor(t *testing.T, n int, within time.Duration) []got {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		g := r.got()
		if len(g) >= n {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver has %d events after %s, want %d: %v", len(g), within, n, ids(g))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ids(g []got) []string {
	out := make([]string, len(g))
	for i, e := range g {
		out[i] = e.ID
	}
	return out
}

// loadAMI reads a recording of real Asterisk from ami/testdata.
func loadAMI(t testing.TB, name string) []ami.Message { return loadAMIRound(t, name, 0) }

// loadAMIRound is loadAMI with the uniqueids and channel names of round
// n > 0 made new (same length), so that the engine takes a replay as new
// calls rather than ghosts of hung-up channels.
func loadAMIRound(t testing.TB, name string, n int) []ami.Message {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "ami", "testdata", name+".ami"))
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		data = bytes.ReplaceAll(data, []byte("1796"), fmt.Appendf(nil, "%04d", 1796+n))
		data = bytes.ReplaceAll(data, []byte("-0000"), fmt.Appendf(nil, "-%04d", n))
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	var out []ami.Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, m)
	}
}

// pbx is the real engine and CDR recorder, fed recorded AMI bytes.
type pbx struct {
	sc  calls.StreamClock
	eng *calls.Engine
	rec *history.Recorder
}

// newPBX builds the engine and, when onTaken is not nil, a recorder
// over an embedded SQLite store calling it.
func newPBX(t *testing.T, onTaken func([]history.CDR)) *pbx {
	p := &pbx{}
	p.eng = calls.New(calls.Config{Now: p.sc.Now, Trunks: []string{"trunk"}})
	p.eng.SetLink(calls.LinkLive)
	p.eng.Publish()
	if onTaken != nil {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "h.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := history.Schema.MigrateSQLite(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		p.rec, err = history.NewRecorder(history.NewSQLite(db, history.Config{}),
			history.RecorderConfig{SpoolDir: t.TempDir(), OnTaken: onTaken})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.rec.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return p
}

// play applies msgs as the link does: each message, then a publish.
func (p *pbx) play(msgs []ami.Message) {
	for _, m := range msgs {
		p.sc.Observe(m)
		p.eng.Apply(m)
		p.eng.Publish()
		if p.rec != nil {
			p.rec.Observe(m)
		}
	}
}

// start runs svc until the test ends (or stop is called).
func start(t *testing.T, svc *Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	<-svc.started // events from here on are seen
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func hookConfig(name, url string) Config {
	return Config{Name: name, URL: url, Secret: testSecret, RetryMax: 200 * time.Millisecond, Timeout: 2 * time.Second}
}

// memHook is a webhook whose queue is only read by the test (its
// receiver is never called): events stay in h.mem.
func memHook(tb testing.TB) *hook {
	cfg := hookConfig("x", "http://127.0.0.1:1/")
	cfg.MaxQueue = 1 << 20
	h, err := newHook(cfg, tb.TempDir(), 1<<30, discard())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.q.Close() })
	return h
}

// memService is a Service, not run, of one memHook and reader r, holding
// for a minute; queued lists the ids in the hook's memory queue.
func memService(tb testing.TB, r *reader) (s *Service, queued func() []string) {
	h := memHook(tb)
	s = &Service{hooks: []*hook{h}, log: discard(), opts: Options{CDRHold: time.Minute}, readers: []*reader{r}}
	return s, func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var out []string
		for _, r := range h.mem {
			out = append(out, r.ID)
		}
		return out
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
