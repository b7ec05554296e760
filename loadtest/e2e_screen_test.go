package loadtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// testScreen is a screen that read obs (each extension's in order).
func testScreen(obs map[string][]observation) *screen {
	s := newScreen(newScreenWorker())
	for x, os := range obs {
		for _, o := range os {
			s.add(time.Now().UnixNano(), decodedUpdate{exten: x, o: o})
		}
	}
	return s
}

func extenUpdate(seq int, exten, status string) []byte {
	// About the size of a real one (1 KB: names, numbers, a conversation).
	pad := strings.Repeat("x", 800)
	return fmt.Appendf(nil, `{"op":"event","seq":%d,"type":"extenUpdate","at":1764600000000,"data":{"exten":%q,"name":%q,"status":%q,"conversations":{"c1":{"connected":true}}}}`, seq, exten, pad, status)
}

// TestScreensShareDecodes: screens on one reader worker share one decode
// per message; a message with the same seq but other bytes (another
// user's view) is decoded for itself, not taken for the first; other
// events and replies are not recorded; a later snapshot is a resync; a
// seq going back is an error.
func TestScreensShareDecodes(t *testing.T) {
	w := &screens{workers: []*screenWorker{newScreenWorker()}, allIn: make(chan struct{})}
	w.screens = []*screen{newScreen(w.workers[0]), newScreen(w.workers[0])}
	t0 := time.Now().UnixNano()
	for _, s := range w.screens {
		s.epoch = t0 // read times are kept in µs from it
	}
	for id := range 2 {
		w.Message(0, id, []byte(`{"op":"snapshot","seq":6,"extensions":{"3001":{"exten":"3001","status":"online"}}}`), t0)
	}
	select {
	case <-w.allIn:
	default:
		t.Fatal("both screens have their snapshot, allIn not closed")
	}
	w.Message(0, 0, extenUpdate(7, "3001", "ringing"), t0+1*1e3)
	w.Message(0, 1, extenUpdate(7, "3001", "ringing"), t0+2*1e3)
	w.Message(0, 1, extenUpdate(7, "3002", "busy"), t0+3*1e3)
	w.Message(0, 0, []byte(`{"op":"event","seq":8,"type":"other","at":1}`), t0+4*1e3)
	w.Message(0, 0, []byte(`{"op":"pong"}`), t0+5*1e3)
	w.Message(0, 0, []byte(`{"op":"snapshot","seq":9,"extensions":{"3001":{"exten":"3001","status":"online","conversations":{}}}}`), t0+6*1e3)
	w.Message(0, 1, extenUpdate(5, "3003", "busy"), t0+7*1e3)
	if n := len(w.workers[0].table); n != 4 { // 3001 ringing, 3002 busy, the resync's 3001, 3003
		t.Errorf("%d updates decoded, want 4", n)
	}
	a, b := w.screens[0].byExten(), w.screens[1].byExten()
	if o := a["3001"]; len(o) != 2 || o[0].status != "ringing" || !o[0].connected || o[0].convs != 1 || o[0].at.UnixNano() != t0+1e3 ||
		o[1].status != "online" || o[1].convs != 0 || len(a) != 1 || w.screens[0].resyncs != 1 {
		t.Errorf("screen a: %+v", a)
	}
	if len(b["3001"]) != 1 || b["3001"][0].at.UnixNano() != t0+2e3 || len(b["3002"]) != 1 || b["3002"][0].status != "busy" || len(b["3003"]) != 1 {
		t.Errorf("screen b: %+v", b)
	}
	n, _ := w.ws.errs.snapshot()
	if len(n) != 1 || n[ErrSeqBack] != 1 {
		t.Errorf("errors %v, want one %s", n, ErrSeqBack)
	}
	// Screen b read up to seq 7 (its 5 came back), a up to 9: b is behind.
	if n := screensBehind(w.screens); n != 1 {
		t.Errorf("%d screens behind, want 1", n)
	}
	if got := w.bytesRead(); got < 3000 {
		t.Errorf("%d bytes read", got)
	}
}

// BenchmarkScreenEvent: what a screen does with an extension update it
// reads, the decode shared with the worker's other screens.
func BenchmarkScreenEvent(b *testing.B) {
	w := &screens{workers: []*screenWorker{newScreenWorker()}}
	w.screens = []*screen{newScreen(w.workers[0])}
	w.screens[0].subscribed = true
	msg := extenUpdate(12345, "3001", "ringing")
	w.Message(0, 0, msg, 1)
	b.ReportAllocs()
	for b.Loop() {
		w.screens[0].recs = w.screens[0].recs[:0]
		w.Message(0, 0, msg, 2)
	}
}

// TestMatchCalls: a call is timed on every screen that showed its callee
// ringing and connected after its INVITE and before the pair's next call;
// one a screen did not show counts missing once, with that screen named;
// a call not answered counts failed, not missing.
func TestMatchCalls(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	recs := []callRecord{
		{caller: "3000", callee: "3100", invite: ms(2000), ok: ms(2200)}, // the pair's second call
		{caller: "3000", callee: "3100", invite: ms(0), ok: ms(200)},
		{caller: "3001", callee: "3101", invite: ms(100), err: errors.New("busy here")},
	}
	show := func(s *screen, at int, exten string, o observation) {
		s.add(ms(at).UnixNano(), decodedUpdate{exten: exten, o: o})
	}
	w := newScreenWorker()
	a, b := newScreen(w), newScreen(w)
	for _, s := range []*screen{a, b} {
		show(s, 10, "3100", observation{status: "ringing", convs: 1})
		show(s, 210, "3100", observation{status: "busy", convs: 1, connected: true})
	}
	// a shows the second call ringing 30 ms after its INVITE; b only a
	// ringing left over from the first (before the INVITE's slack), so it
	// misses it.
	show(a, 2030, "3100", observation{status: "ringing", convs: 1})
	show(a, 2250, "3100", observation{status: "busy", convs: 1, connected: true})
	show(b, 2250, "3100", observation{status: "busy", convs: 1})
	rep := &Report{Latency: &Histogram{}, Errors: map[string]uint64{}, FirstErrors: map[string]string{}, Counters: map[string]uint64{}}
	connected := &Histogram{}
	matchCalls(rep, connected, recs, []*screen{a, b}, E2EConfig{})
	c := rep.Counters
	if c["calls_placed"] != 3 || c["calls_answered"] != 2 || c["calls_failed"] != 1 || c["calls_missing"] != 1 || rep.Requests != 2 {
		t.Errorf("counters %v, requests %d", c, rep.Requests)
	}
	if n := rep.Latency.Count(); n != 3 { // call 1 on both screens, call 2 on a
		t.Errorf("%d ringing samples, want 3", n)
	}
	if mx := rep.Latency.Max(); mx < 29*time.Millisecond || mx > 31*time.Millisecond {
		t.Errorf("slowest ringing %v, want 30 ms", mx)
	}
	if connected.Count() != 3 || connected.Max() > 51*time.Millisecond {
		t.Errorf("connected: %d samples, max %v", connected.Count(), connected.Max())
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "on 1 of 2 screens: client 1 saw ringing=false connected=false") {
		t.Errorf("notes %q", rep.Notes)
	}
	if rep.Errors["call:"+Kind(errors.New("busy here"))] != 1 {
		t.Errorf("errors %v", rep.Errors)
	}
}
