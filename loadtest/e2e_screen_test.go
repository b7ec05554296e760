package loadtest

import (
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
	for id := range 2 {
		w.Message(0, id, []byte(`{"op":"snapshot","seq":6,"extensions":{"3001":{"exten":"3001","status":"online"}}}`), t0)
	}
	select {
	case <-w.allIn:
	default:
		t.Fatal("both screens have their snapshot, allIn not closed")
	}
	w.Message(0, 0, extenUpdate(7, "3001", "ringing"), t0+1)
	w.Message(0, 1, extenUpdate(7, "3001", "ringing"), t0+2)
	w.Message(0, 1, extenUpdate(7, "3002", "busy"), t0+3)
	w.Message(0, 0, []byte(`{"op":"event","seq":8,"type":"other","at":1}`), t0+4)
	w.Message(0, 0, []byte(`{"op":"pong"}`), t0+5)
	w.Message(0, 0, []byte(`{"op":"snapshot","seq":9,"extensions":{"3001":{"exten":"3001","status":"online","conversations":{}}}}`), t0+6)
	w.Message(0, 1, extenUpdate(5, "3003", "busy"), t0+7)
	if n := len(w.workers[0].table); n != 4 { // 3001 ringing, 3002 busy, the resync's 3001, 3003
		t.Errorf("%d updates decoded, want 4", n)
	}
	a, b := w.screens[0].byExten(), w.screens[1].byExten()
	if o := a["3001"]; len(o) != 2 || o[0].status != "ringing" || !o[0].connected || o[0].convs != 1 || o[0].at.UnixNano() != t0+1 ||
		o[1].status != "online" || o[1].convs != 0 || len(a) != 1 || w.screens[0].resyncs != 1 {
		t.Errorf("screen a: %+v", a)
	}
	if len(b["3001"]) != 1 || b["3001"][0].at.UnixNano() != t0+2 || len(b["3002"]) != 1 || b["3002"][0].status != "busy" || len(b["3003"]) != 1 {
		t.Errorf("screen b: %+v", b)
	}
	n, _ := w.ws.errs.snapshot()
	if len(n) != 1 || n[ErrSeqBack] != 1 {
		t.Errorf("errors %v, want one %s", n, ErrSeqBack)
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
