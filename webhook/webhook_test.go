package webhook

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/history"
)

// want is one expected event: extension (empty for a CDR) and type.
type want struct{ ext, typ string }

var replays = []struct {
	name   string
	events []want
	check  func(t *testing.T, g []got)
}{
	{
		name: "basic_call_caller_hangup",
		// Alice 201 calls Bob 202; Bob answers; Alice hangs up.
		events: []want{{"202", "ringing"}, {"201", "answered"}, {"202", "answered"}, {"202", "hangup"}, {"201", "hangup"}, {"", "cdr"}},
		check: func(t *testing.T, g []got) {
			ring := g[0].Event
			if ring.Number != "201" || ring.Name != "Alice" || ring.Direction != "in" || ring.Phonebook != nil || ring.Queue != "" {
				t.Errorf("ringing: %+v", ring)
			}
			if a := g[1].Event; a.Number != "202" || a.Name != "Bob" || a.Direction != "out" {
				t.Errorf("201 answered: %+v", a)
			}
			if h := g[3].Event; h.Answered == nil || !*h.Answered || h.Duration == nil || h.Number != "201" {
				t.Errorf("202 hangup: %+v", h)
			}
			if c := g[5].Event.CDR; c == nil || c.Src != "201" || c.Dst != "202" || c.Disposition != "ANSWERED" {
				t.Errorf("cdr: %+v", c)
			}
		},
	},
	{
		name: "queue_answered",
		// 0612345678 'Mario Rossi' through queue support: 203 and 204
		// ring, Carol 203 answers, Dave 204 stops; the caller hangs up.
		events: []want{{"203", "ringing"}, {"204", "ringing"}, {"204", "hangup"}, {"203", "answered"}, {"203", "hangup"}, {"", "cdr"}, {"", "cdr"}},
		check: func(t *testing.T, g []got) {
			for _, r := range g[:2] {
				e := r.Event
				if e.Number != "0612345678" || e.Name != "Mario Rossi" || e.Queue != "support" || !e.Trunk ||
					e.Phonebook == nil || e.Phonebook.Name != "Rossi SpA" {
					t.Errorf("ringing: %+v", e)
				}
			}
			if h := g[2].Event; h.Answered == nil || *h.Answered || *h.Duration != 0 {
				t.Errorf("204 hangup (not answered): %+v", h)
			}
			if h := g[4].Event; h.Answered == nil || !*h.Answered {
				t.Errorf("203 hangup: %+v", h)
			}
		},
	},
}

func lookup(n string) string { return map[string]string{"0612345678": "Rossi SpA"}[n] }

// split puts the call events first, then the CDRs, each in the order
// received: the two come from different sources (feed, recorder), each
// in order, and a CDR may overtake its call's hangup.
func split(g []got) []got {
	var calls, cdrs []got
	for _, e := range g {
		if e.Type == TypeCDR {
			cdrs = append(cdrs, e)
		} else {
			calls = append(calls, e)
		}
	}
	return append(calls, cdrs...)
}

// checkEvents compares what a receiver took with the expected events,
// in order (call events first, then CDRs: split).
func checkEvents(t *testing.T, g []got, ws []want) {
	t.Helper()
	g = split(g)
	if len(g) != len(ws) {
		t.Fatalf("%d events, want %d: %v", len(g), len(ws), ids(g))
	}
	for i, w := range ws {
		e := g[i].Event
		if e.Extension != w.ext || e.Type != w.typ {
			t.Errorf("event %d is %s %s, want %s %s", i, e.Extension, e.Type, w.ext, w.typ)
		}
		if want := e.LinkedID + ":" + e.UniqueID + ":" + e.Type; w.typ != "cdr" && e.ID != want {
			t.Errorf("event %d: id %q, want %q", i, e.ID, want)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.At); err != nil {
			t.Errorf("event %d: at %q: %v", i, e.At, err)
		}
	}
}

// TestReplayEvents: the events of recordings of real Asterisk, replayed
// through the engine and the CDR recorder, reach a real receiver with the
// right content, a valid signature and the bearer token.
func TestReplayEvents(t *testing.T) {
	for _, rp := range replays {
		t.Run(rp.name, func(t *testing.T) {
			r := newReceiver(t)
			r.mu.Lock()
			r.token = "s3cret-token"
			r.mu.Unlock()
			var svc atomic.Pointer[Service]
			p := newPBX(t, func(c []history.CDR) { svc.Load().CDRs(c) })
			cfg := hookConfig("crm", r.URL())
			cfg.Auth.Token = "s3cret-token"
			s, err := New(p.eng, []Config{cfg}, Options{Dir: t.TempDir(), Lookup: lookup})
			if err != nil {
				t.Fatal(err)
			}
			svc.Store(s)
			start(t, s)
			p.play(loadAMI(t, rp.name))
			g := r.waitFor(t, len(rp.events), 20*time.Second)
			time.Sleep(100 * time.Millisecond) // nothing more comes
			g = r.got()
			checkEvents(t, g, rp.events)
			rp.check(t, split(g))
			if st := s.Stats()[0]; st.Delivered != uint64(len(rp.events)) || st.Dropped != 0 || st.Failed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestFilters: a webhook gets only the event types and extensions it
// asked for; a CDR matches on its src or dst.
func TestFilters(t *testing.T) {
	all, only203, cdrOnly := newReceiver(t), newReceiver(t), newReceiver(t)
	var svc atomic.Pointer[Service]
	p := newPBX(t, func(c []history.CDR) { svc.Load().CDRs(c) })
	c1 := hookConfig("all", all.URL())
	c2 := hookConfig("only203", only203.URL())
	c2.Extensions, c2.Events = []string{"203"}, []string{TypeRinging, TypeHangup}
	c3 := hookConfig("cdr201", cdrOnly.URL())
	c3.Extensions, c3.Events = []string{"201"}, []string{TypeCDR}
	s, err := New(p.eng, []Config{c1, c2, c3}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc.Store(s)
	start(t, s)
	p.play(loadAMI(t, "queue_answered"))
	p.play(loadAMI(t, "basic_call_caller_hangup"))
	all.waitFor(t, 13, 20*time.Second)
	checkEvents(t, only203.waitFor(t, 2, 10*time.Second), []want{{"203", "ringing"}, {"203", "hangup"}})
	checkEvents(t, cdrOnly.waitFor(t, 1, 10*time.Second), []want{{"", "cdr"}})
	time.Sleep(100 * time.Millisecond)
	if n := len(only203.got()) + len(cdrOnly.got()); n != 3 {
		t.Errorf("filtered webhooks got %d events, want 3", n)
	}
}

// TestOutageAndRestart: the receiver goes down (connections refused,
// then 503) while calls happen and the sender is restarted in between;
// once it is back it gets every event, in order, and none it
// acknowledged is sent again.
func TestOutageAndRestart(t *testing.T) {
	r := newReceiver(t)
	dir := t.TempDir()
	var svc atomic.Pointer[Service]
	p := newPBX(t, func(c []history.CDR) { svc.Load().CDRs(c) })
	open := func() *Service {
		s, err := New(p.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: dir, Lookup: lookup})
		if err != nil {
			t.Fatal(err)
		}
		svc.Store(s)
		return s
	}
	// A first call delivered while all is well.
	s1 := open()
	stop1 := start(t, s1)
	p.play(loadAMI(t, "basic_call_caller_hangup"))
	r.waitFor(t, 6, 20*time.Second)

	// Down: the second call is queued, on disk, and retried.
	r.stop()
	p.play(loadAMI(t, "queue_answered"))
	waitStats(t, s1, func(st Stats) bool { return st.Queued == 7 && st.Failed > 0 })
	time.Sleep(time.Second)
	stop1()
	if st := s1.Stats()[0]; st.Queued != 7 || st.Dropped != 0 {
		t.Fatalf("at the restart: %+v", st)
	}

	// A new sender on the same queue; a third call meanwhile; the
	// receiver comes back answering 503 for a while, then takes them.
	s2 := open()
	start(t, s2)
	p.play(loadAMIRound(t, "basic_call_caller_hangup", 1))
	waitStats(t, s2, func(st Stats) bool { return st.Queued == 13 })
	r.restart()
	r.setMode("fail")
	time.Sleep(time.Second)
	r.setMode("ok")
	g := r.waitFor(t, 6+7+6, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	g = r.got()
	for i, part := range [][]got{g[:6], g[6:13], g[13:]} {
		t.Run(fmt.Sprint("call", i+1), func(t *testing.T) { checkEvents(t, part, replays[i%2].events) })
	}
	seen := map[string]int{}
	for i, e := range g[:13] {
		if j, ok := seen[e.ID]; ok {
			t.Errorf("%s acknowledged twice (events %d and %d)", e.ID, j, i)
		}
		seen[e.ID] = i
	}
	st := s2.Stats()[0]
	if st.Dropped != 0 || st.Queued != 0 || st.Delivered != 13 || st.Failed == 0 {
		t.Errorf("after the outage: %+v", st)
	}
	r.mu.Lock()
	t.Logf("after the outage: %+v; receiver saw %d attempts", st, r.attempts)
	r.mu.Unlock()
}

func waitStats(t *testing.T, s *Service, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(s.Stats()[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("stats never reached: %+v", s.Stats()[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStalledReceiver: a receiver that never answers holds up its own
// sender only. The feed reader keeps up with the engine (it only
// appends to a bounded memory queue), events beyond the disk bound are
// dropped and counted, and a second webhook still gets everything.
func TestStalledReceiver(t *testing.T) {
	stalled, healthy := newReceiver(t), newReceiver(t)
	stalled.setMode("stall")
	p := newPBX(t, nil)
	c1 := hookConfig("stalled", stalled.URL())
	c1.MaxQueue = 64 << 10 // about 150 events
	c1.Timeout = time.Hour
	s, err := New(p.eng, []Config{c1, hookConfig("healthy", healthy.URL())}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	const rounds = 10
	for i := range rounds {
		p.play(loadAMIRound(t, "load_10_calls_5cps", i))
	}
	// The reader has read the whole feed while the stalled sender sits
	// in its first POST.
	last := p.eng.Feed().LastSeq()
	deadline := time.Now().Add(20 * time.Second)
	for s.readers[0].readSeq.Load() != last {
		if time.Now().After(deadline) {
			t.Fatalf("feed reader at seq %d, feed at %d", s.readers[0].readSeq.Load(), last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := healthy.waitFor(t, 1, 10*time.Second)
	waitStats(t, s, func(Stats) bool {
		st := s.Stats()
		return st[0].Queued+int64(st[0].Dropped) == int64(st[1].Delivered) && st[1].Queued == 0
	})
	st := s.Stats()
	if st[1].Dropped != 0 {
		t.Errorf("healthy webhook: %+v", st[1])
	}
	if st[0].Dropped == 0 || st[0].Delivered != 0 {
		t.Errorf("stalled webhook: %+v, want drops past its bound", st[0])
	}
	stalled.mu.Lock()
	attempts := stalled.attempts
	stalled.mu.Unlock()
	if attempts != 1 {
		t.Errorf("stalled receiver saw %d POSTs, want the one it holds", attempts)
	}
	t.Logf("stalled: %+v; healthy: %+v (%d events)", st[0], st[1], len(h))
	stalled.setMode("ok")
}

// TestEnqueueNeverBlocks: with nothing draining the memory queue, an
// event past its bound is dropped at once and counted.
func TestEnqueueNeverBlocks(t *testing.T) {
	cfg := hookConfig("x", "http://127.0.0.1:1/")
	cfg.MaxQueue = 1 << 20
	h, err := newHook(cfg, t.TempDir(), 4, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer h.q.Close()
	for i := range 10 {
		h.enqueue(record{ID: fmt.Sprint(i)})
	}
	if h.dropped.Load() != 6 || h.pending() != 4 {
		t.Fatalf("dropped %d, pending %d; want 6 and 4", h.dropped.Load(), h.pending())
	}
	if !slices.ContainsFunc(h.mem, func(r record) bool { return r.ID == "3" }) {
		t.Fatal("the first events were not kept")
	}
}

// TestSendingOnlyWhileLeading: with Options.Sending false (a bus node
// that does not lead) nothing is sent, though the calls are followed;
// once it says true the next call's events are sent, and the call events
// and the CDR derived and taken while not sending (a takeover's) go out
// first; a CDR held longer than CDRHold is dropped.
func TestSendingOnlyWhileLeading(t *testing.T) {
	r := newReceiver(t)
	var svc atomic.Pointer[Service]
	var leading atomic.Bool
	p := newPBX(t, func(c []history.CDR) { svc.Load().CDRs(c) })
	s, err := New(p.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: t.TempDir(), Lookup: lookup, Sending: leading.Load})
	if err != nil {
		t.Fatal(err)
	}
	svc.Store(s)
	start(t, s)
	p.play(loadAMI(t, "basic_call_caller_hangup"))
	waitHeld := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			h := &s.readers[0].held
			h.mu.Lock()
			held := len(h.cdrs)
			h.mu.Unlock()
			if held >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d CDR batches held, want %d", held, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitHeld(1)
	time.Sleep(100 * time.Millisecond)
	if g := r.got(); len(g) != 0 {
		t.Fatalf("sent while not leading: %v", ids(g))
	}
	leading.Store(true)
	p.play(loadAMI(t, "queue_answered"))
	g := r.waitFor(t, 13, 20*time.Second)
	time.Sleep(100 * time.Millisecond)
	g = split(r.got())
	var types []string
	for _, e := range g {
		types = append(types, e.Event.Extension+" "+e.Type)
	}
	want := "202 ringing,201 answered,202 answered,202 hangup,201 hangup," +
		"203 ringing,204 ringing,204 hangup,203 answered,203 hangup,cdr,cdr,cdr"
	if got := strings.ReplaceAll(strings.Join(types, ","), " cdr", "cdr"); got != want {
		t.Fatalf("sent %s, want %s", got, want)
	}
	// Held too long: dropped.
	leading.Store(false)
	s.opts.CDRHold = time.Millisecond
	s.holdCDRs(s.readers[0], []history.CDR{{UniqueID: "old"}})
	time.Sleep(5 * time.Millisecond)
	leading.Store(true)
	s.sendHeld(s.readers[0])
	time.Sleep(200 * time.Millisecond)
	if n := len(r.got()); n != len(g) {
		t.Fatalf("a CDR held past CDRHold was sent: %d events, want %d", n, len(g))
	}
}

// TestHeldCDRsSentOnce: CDRs held while not sending (from any goroutine,
// while the feed reader keeps calling sendHeld) are each queued exactly
// once, by a sendHeld after their hold; a sendHeld with none held queues
// nothing.
func TestHeldCDRsSentOnce(t *testing.T) {
	r := &reader{}
	s, queued := memService(t, r)
	s.sendHeld(r)
	if q := queued(); len(q) != 0 {
		t.Fatalf("nothing held, queued %v", q)
	}
	s.holdCDRs(r, []history.CDR{{UniqueID: "1.1", Src: "201", Dst: "202"}})
	s.sendHeld(r)
	if q := queued(); len(q) != 1 {
		t.Fatalf("one CDR held, queued %v", q)
	}
	s.sendHeld(r)
	if q := queued(); len(q) != 1 {
		t.Fatalf("sent twice: %v", q)
	}
	// Holds racing the reader's sendHeld: each CDR once.
	const n = 200
	stop := make(chan struct{})
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		for {
			select {
			case <-stop:
				return
			default:
				s.sendHeld(r)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 4 {
				s.holdCDRs(r, []history.CDR{{UniqueID: fmt.Sprintf("2.%d", g*n+i), Src: "201", Dst: "202"}})
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-reader
	s.sendHeld(r) // after every hold returned: the rest
	q := queued()
	slices.Sort(q)
	if len(q) != n+1 || len(slices.Compact(q)) != n+1 {
		t.Fatalf("%d CDRs queued (%d distinct), want %d each once", len(q), len(slices.Compact(slices.Clone(q))), n+1)
	}
}
