package wsbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ev(exten, status string) []byte {
	return fmt.Appendf(nil, `{"op":"event","seq":7,"type":"extenUpdate","at":1,"data":{"exten":"%s","name":"User %s","status":"%s","dnd":false`, exten, exten, status)
}

// A screen starts ringing once per episode: a second ringing update, or
// another client's, or another extension's, is no new start for it; an
// update that is not ringing ends the episode. Nothing is recorded while
// not measuring, but the state is followed.
func TestRingsObserve(t *testing.T) {
	r := newRings()
	r.observe(1, ev("2001", "ringing"), 10, false) // before measuring: followed, not recorded
	r.observe(1, ev("2001", "ringing"), 11, true)  // same episode
	r.observe(1, ev("2001", "busy"), 12, true)
	r.observe(1, ev("2001", "busy_ringing"), 13, true) // a new episode
	r.observe(2, ev("2001", "ringing"), 14, true)      // another client
	r.observe(1, ev("2003", "ringing"), 15, true)      // another extension
	r.observe(1, []byte(`{"op":"event","seq":8,"type":"queueUpdate","at":1,"data":{"exten":"2005","status":"ringing"`), 16, true)
	r.observe(1, ev("", "ringing"), 17, true) // no number: skipped
	want := []ringRec{{2001, 13}, {2001, 14}, {2003, 15}}
	if fmt.Sprint(r.recs) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", r.recs, want)
	}
}

// Each ringing is timed from its extension's latest stamp before it; a
// ringing with no stamp before it is unmatched; the calls placed in the
// window are expected on every screen; a line being written is left out
// and a bad line is an error.
func TestStampsMatch(t *testing.T) {
	st, err := readStamps(strings.NewReader("2001 1000000\n2003 1500000\n2001 5000000\n2001 90"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st[2001]) != 2 {
		t.Fatalf("stamps %v: the unterminated line was read", st)
	}
	rr := ringResult{calls: map[callKey][]time.Duration{}}
	recs := []ringRec{{2001, 1200000}, {2001, 5300000}, {2001, 900000}, {2003, 1600000}, {2003, 1800000}, {2009, 2000000}}
	st.match(recs, 2, 1000000, 2000000, &rr)
	if rr.latency.Count() != 4 || rr.unmatched != 2 {
		t.Errorf("%d matched, %d unmatched; want 4, 2", rr.latency.Count(), rr.unmatched)
	}
	if rr.latency.Min() != 100*time.Microsecond || rr.latency.Max() != 300*time.Microsecond {
		t.Errorf("latencies %v..%v, want 100µs..300µs", rr.latency.Min(), rr.latency.Max())
	}
	if rr.expected != 4 || rr.seen != 3 { // 2 calls in the window x 2 clients; 2001@1000 once, 2003@1500 twice
		t.Errorf("expected %d seen %d, want 4, 3", rr.expected, rr.seen)
	}
	var calls strings.Builder
	rr.writeCalls(&calls)
	if want := "2001 1000000 1 200 200\n2003 1500000 2 100 300\n2001 5000000 1 300 300\n"; calls.String() != want {
		t.Errorf("calls:\n%s", calls.String())
	}
	if _, err := readStamps(strings.NewReader("2001 1000\nx 12\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

// The attached clients against a real hub: each extension made ringing
// after its stamp is seen ringing once by every client, timed from the
// stamp, none missing.
func TestAttachRings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := startHub(ctx, 50, "panel", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	const clients, calls = 20, 5
	l, err := newLoad(clients, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.readers.Close()
	if err := l.connect(h.url, h.token, clients); err != nil {
		t.Fatal(err)
	}
	for range clients {
		if err := <-l.ready; err != nil {
			t.Fatal(err)
		}
	}
	l.measuring.Store(true)
	path := filepath.Join(t.TempDir(), "stamps")
	f, _ := os.Create(path)
	// Every client reads each update before the next: a client's queue
	// keeps only the latest update of an extension, so an in-use update
	// queued behind the ringing one would replace it (the hub's
	// coalescing, not a lost ringing).
	read := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); l.msgs.Load() < uint64(n) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	t0 := time.Now()
	for k := range calls {
		fmt.Fprintf(f, "%d %d\n", 1000+k, time.Now().UnixNano())
		h.devState(1000+k, "RINGING")
		h.devState(1000+k, "RINGING") // still ringing: no update, no new start
		read(clients * (2*k + 1))
		h.devState(1000+k, "INUSE")
		read(clients * (2*k + 2))
	}
	f.Close()
	t1 := time.Now()
	l.measuring.Store(false)
	l.readers.Close()
	var res attachResult
	res.Label = "hub"
	callsOut := filepath.Join(t.TempDir(), "calls")
	if err := res.addRings(l, path, callsOut, clients, t0, t1.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(callsOut)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != calls {
		t.Fatalf("calls file:\n%s", b)
	}
	for k, line := range lines {
		var x, n, med, mx int64
		var st int64
		if _, err := fmt.Sscan(line, &x, &st, &n, &med, &mx); err != nil || x != int64(1000+k) || n != clients || med > mx {
			t.Errorf("call line %q: %v", line, err)
		}
	}
	r := res.Ring
	if r.Count != clients*calls || r.Expected != clients*calls || r.Missing != 0 || r.Unmatched != 0 {
		t.Errorf("ringing: %+v (events read %d), want %d each", *r, l.msgs.Load(), clients*calls)
	}
	if r.P50 <= 0 || r.Max > 5000 {
		t.Errorf("latencies %+v", *r)
	}
}

// BenchmarkMessage is a screen's cost per event read, with ringing
// followed (-stamps: the head's fields and the state map) and without.
func BenchmarkMessage(b *testing.B) {
	for _, withRings := range []bool{true, false} {
		b.Run(fmt.Sprintf("rings=%v", withRings), func(b *testing.B) {
			l, err := newLoad(1, 1, withRings)
			if err != nil {
				b.Fatal(err)
			}
			defer l.readers.Close()
			l.got[0] = true
			l.measuring.Store(true)
			heads := [][]byte{ev("2001", "ringing"), ev("2001", "busy"), ev("2002", "online")}
			b.ReportAllocs()
			for i := range b.N {
				l.Message(0, 0, heads[i%3], int64(i))
				if withRings && len(l.rings[0].recs) > 1<<16 {
					l.rings[0].recs = l.rings[0].recs[:0]
				}
			}
		})
	}
}
