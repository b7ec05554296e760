package webhook

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctibridge/ctibridge/history"
)

// takeover is two nodes on one PBX (one engine: the same changes, as two
// bridges' served replicas have), each with its webhook service and its
// receiver: old sends all along, standby sends once lead is set. The
// recorder's CDRs go to both, as each bridge's recorder hears every Cdr.
type takeover struct {
	p                *pbx
	old, standby     *Service
	oldRcv, standRcv *receiver
	lead             atomic.Bool
}

func newTakeover(t *testing.T, hold time.Duration) *takeover {
	k := &takeover{oldRcv: newReceiver(t), standRcv: newReceiver(t)}
	var ready atomic.Bool
	k.p = newPBX(t, func(c []history.CDR) {
		if ready.Load() {
			k.old.CDRs(c)
			k.standby.CDRs(c)
		}
	})
	var err error
	if k.old, err = New(k.p.eng, []Config{hookConfig("crm", k.oldRcv.URL())}, Options{Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if k.standby, err = New(k.p.eng, []Config{hookConfig("crm", k.standRcv.URL())},
		Options{Dir: t.TempDir(), Sending: k.lead.Load, CDRHold: hold}); err != nil {
		t.Fatal(err)
	}
	ready.Store(true)
	start(t, k.old)
	start(t, k.standby)
	return k
}

// standbyCall plays a call while the standby does not send, and waits
// until the standby has derived its events and holds its CDR.
func (k *takeover) standbyCall(t *testing.T, round int) {
	t.Helper()
	k.p.play(loadAMIRound(t, "basic_call_caller_hangup", round))
	caughtUp(t, k.standby.readers[0], k.p)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := &k.standby.readers[0].held
		h.mu.Lock()
		n := len(h.cdrs)
		h.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby holds no CDR")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTakeoverSendsHeldEvents: a standby derives a call's events while
// it does not send (the old leader's reader may not have sent them); it
// takes the lead and its next wake sends them, with the same ids as the
// node that sent all along, then its CDR, then the next call live. The
// node that sent all along sent each event once. This is the call around
// a takeover that, without the hold, got only its CDR.
func TestTakeoverSendsHeldEvents(t *testing.T) {
	k := newTakeover(t, time.Minute)
	k.standbyCall(t, 0)
	time.Sleep(100 * time.Millisecond)
	if g := k.standRcv.got(); len(g) != 0 {
		t.Fatalf("the standby sent while not leading: %v", ids(g))
	}
	k.lead.Store(true)
	k.p.play(loadAMIRound(t, "basic_call_caller_hangup", 1)) // its wake sends the held ones
	ref := k.oldRcv.waitFor(t, 12, 20*time.Second)
	g := k.standRcv.waitFor(t, 12, 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	ref, g = k.oldRcv.got(), k.standRcv.got()
	if len(ref) != 12 || len(slices.Compact(slices.Sorted(slices.Values(ids(ref))))) != 12 {
		t.Fatalf("the node sending all along: %v, want 12 events each once", ids(ref))
	}
	call := []want{{"202", "ringing"}, {"201", "answered"}, {"202", "answered"}, {"202", "hangup"}, {"201", "hangup"}}
	checkEvents(t, ref, append(append(slices.Clone(call), call...), want{"", "cdr"}, want{"", "cdr"}))
	// The held call, then its CDR, in order (the hold's), then the
	// second call (its CDR may overtake its hangup: split).
	if !slices.Equal(ids(g[:6]), ids(split(ref[:6]))) {
		t.Errorf("the takeover sent first %v, want the held call and its CDR %v", ids(g[:6]), ids(split(ref[:6])))
	}
	if !slices.Equal(ids(split(g[6:])), ids(split(ref[6:]))) {
		t.Errorf("then %v, want %v", ids(split(g[6:])), ids(split(ref[6:])))
	}
}

// TestTakeoverHoldExpires: what the standby derived and took longer than
// CDRHold before it takes the lead is not sent; the next call is.
func TestTakeoverHoldExpires(t *testing.T) {
	const hold = 100 * time.Millisecond
	k := newTakeover(t, hold)
	k.standbyCall(t, 0)
	time.Sleep(2 * hold)
	k.lead.Store(true)
	k.p.play(loadAMIRound(t, "basic_call_caller_hangup", 1))
	k.oldRcv.waitFor(t, 12, 20*time.Second)
	k.standRcv.waitFor(t, 6, 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	g, all := k.standRcv.got(), k.oldRcv.got()
	if !slices.Equal(ids(split(g)), ids(split(all[6:]))) {
		t.Errorf("the standby sent %v, want the second call's alone %v", ids(split(g)), ids(split(all[6:])))
	}
}

// TestHoldOrderAndBound: a CDR taken before the feed reader derived its
// call's hangup goes after it, but before a later call's event; the
// first live event once sending goes after the held ones; beyond
// holdMaxEvents call events the oldest are dropped, the CDRs kept, and
// counted (ctibridge_webhook_held_dropped_total) and logged at most once
// a minute with the count since the last line.
func TestHoldOrderAndBound(t *testing.T) {
	var sending atomic.Bool
	r := &reader{pbx: "pbx1", sends: sending.Load}
	s, queued := memService(t, r)
	var logged bytes.Buffer
	s.log = slog.New(slog.NewTextHandler(&logged, nil))
	ev := func(linked, typ string) *Event {
		return &Event{ID: linked + ":" + linked + ".1:" + typ, Type: typ, Extension: "202", LinkedID: linked, UniqueID: linked + ".1"}
	}
	s.eventOf(r, ev("1", TypeRinging))
	time.Sleep(time.Millisecond)
	s.holdCDRs(r, []history.CDR{{LinkedID: "1", UniqueID: "1.1", Sequence: 1, Src: "201", Dst: "202"}})
	time.Sleep(time.Millisecond)
	s.eventOf(r, ev("1", TypeHangup))
	time.Sleep(time.Millisecond)
	s.eventOf(r, ev("2", TypeRinging))
	if q := queued(); len(q) != 0 {
		t.Fatalf("queued while not sending: %v", q)
	}
	sending.Store(true)
	s.eventOf(r, ev("3", TypeRinging)) // live, after the held ones
	if q, want := queued(), []string{"1:1.1:ringing", "1:1.1:hangup", "1:1.1:cdr:1", "2:2.1:ringing", "3:3.1:ringing"}; !slices.Equal(q, want) {
		t.Fatalf("sent %v, want %v", q, want)
	}

	s.hooks[0].mem = nil
	sending.Store(false)
	s.holdCDRs(r, []history.CDR{{LinkedID: "0", UniqueID: "0.1", Sequence: 1, Src: "201", Dst: "202"}})
	for i := range holdMaxEvents + 5 {
		s.eventOf(r, ev(fmt.Sprint(10+i), TypeRinging))
	}
	s.sendHeld(r)
	q := queued()
	if len(q) != holdMaxEvents+1 || q[0] != "0:0.1:cdr:1" || q[1] != "15:15.1:ringing" || q[len(q)-1] != fmt.Sprintf("%d:%d.1:ringing", 10+holdMaxEvents+4, 10+holdMaxEvents+4) {
		t.Fatalf("%d sent, %v ... %v; want the CDR and the last %d events", len(q), q[:2], q[len(q)-1], holdMaxEvents)
	}
	dropLines := func() []string {
		var out []string
		for l := range strings.Lines(logged.String()) {
			if strings.Contains(l, "hold of a PBX not sent is full") {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return out
	}
	// 5 dropped: the first logged at once, the 4 after within the minute not.
	if l := dropLines(); len(l) != 1 || !strings.Contains(l[0], "pbx=pbx1 dropped=1 ") {
		t.Errorf("log lines about the drops: %q, want one, of the first drop", l)
	}
	want := "# HELP ctibridge_webhook_held_dropped_total Call events a node not sending its PBX's events held for a takeover and dropped, the oldest, past the hold's bound (10000 a PBX).\n" +
		"# TYPE ctibridge_webhook_held_dropped_total counter\nctibridge_webhook_held_dropped_total %d\n"
	if err := testutil.CollectAndCompare(s.Collector(), strings.NewReader(fmt.Sprintf(want, 5)), "ctibridge_webhook_held_dropped_total"); err != nil {
		t.Error(err)
	}
	// A minute after the last line, the next drop logs those since it.
	for i := range holdMaxEvents + 1 {
		s.eventOf(r, ev(fmt.Sprint(20000+i), TypeRinging))
	}
	r.held.mu.Lock()
	r.held.loggedDrop = r.held.loggedDrop.Add(-holdDropLogEvery)
	r.held.mu.Unlock()
	s.eventOf(r, ev("40000", TypeRinging))
	if l := dropLines(); len(l) != 2 || !strings.Contains(l[1], "pbx=pbx1 dropped=6 ") {
		t.Errorf("log lines about the drops: %q, want a second a minute on, of 4+2 drops", l)
	}
	if err := testutil.CollectAndCompare(s.Collector(), strings.NewReader(fmt.Sprintf(want, 7)), "ctibridge_webhook_held_dropped_total"); err != nil {
		t.Error(err)
	}
}
