package webhook

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

// TestNamedPBXEvents: with a named PBX beside the default one, the same
// call on each reaches the webhooks as two calls: site2's with "pbx" and
// its ids qualified (extension, linkedid, uniqueid, the event id), the
// default PBX's as before; an extension filter names site2's extensions
// qualified; a named PBX's CDR (ids qualified by the recorder's feeder)
// carries its pbx.
func TestNamedPBXEvents(t *testing.T) {
	all, only := newReceiver(t), newReceiver(t)
	var svc atomic.Pointer[Service]
	def := newPBX(t, func(c []history.CDR) { svc.Load().CDRs(c) })
	site2 := newPBX(t, nil)
	c2 := hookConfig("site2-202", only.URL())
	c2.Extensions = []string{"site2:202"}
	s, err := New(def.eng, []Config{hookConfig("all", all.URL()), c2},
		Options{Dir: t.TempDir(), PBXs: []PBX{{Name: "site2", State: site2.eng}}})
	if err != nil {
		t.Fatal(err)
	}
	svc.Store(s)
	start(t, s)
	calls := loadAMI(t, "basic_call_caller_hangup")
	site2.play(calls)
	def.play(calls)
	s.CDRs([]history.CDR{{UniqueID: "site2:1796028439.12", LinkedID: "site2:1796028439.11", Sequence: 1, Src: "site2:201", Dst: "site2:202"}})
	g := all.waitFor(t, 12, 20*time.Second) // 5 call events a PBX, 2 CDRs
	time.Sleep(100 * time.Millisecond)
	g = all.got()
	if len(g) != 12 {
		t.Fatalf("%d events, want 12: %v", len(g), ids(g))
	}
	var named, plain []want
	for _, r := range g {
		e := r.Event
		if e.Type == TypeCDR {
			if pbx := strings.HasPrefix(e.UniqueID, "site2:"); pbx != (e.PBX == "site2") || !pbx && e.PBX != "" {
				t.Errorf("cdr %s: pbx %q", e.UniqueID, e.PBX)
			}
			continue
		}
		if e.PBX == "" {
			if strings.Contains(e.ID, "site2") || strings.Contains(e.Extension, ":") {
				t.Errorf("the default PBX's event %+v", e)
			}
			plain = append(plain, want{e.Extension, e.Type})
			continue
		}
		if e.PBX != "site2" || !strings.HasPrefix(e.Extension, "site2:") || !strings.HasPrefix(e.LinkedID, "site2:") ||
			!strings.HasPrefix(e.UniqueID, "site2:") || e.ID != e.LinkedID+":"+e.UniqueID+":"+e.Type || r.ID != e.ID {
			t.Errorf("site2's event %+v (header id %s)", e, r.ID)
		}
		named = append(named, want{strings.TrimPrefix(e.Extension, "site2:"), e.Type})
	}
	wantCalls := []want{{"202", "ringing"}, {"201", "answered"}, {"202", "answered"}, {"202", "hangup"}, {"201", "hangup"}}
	if !slices.Equal(named, wantCalls) || !slices.Equal(plain, wantCalls) {
		t.Errorf("site2's %v, the default's %v, want each %v", named, plain, wantCalls)
	}
	// Its CDR too: its destination is site2:202.
	only.waitFor(t, 4, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	checkEvents(t, only.got(), []want{{"site2:202", "ringing"}, {"site2:202", "answered"}, {"site2:202", "hangup"}, {"", "cdr"}})
}

// TestSendingPerPBX: one service, two PBXs, each sent while this node
// leads it (PBX.Sending, Options.Sending), its queue the webhook's one.
// The receiver is down throughout: the default PBX's call is queued,
// site2's (another node leads it) is followed but not sent, its call
// events and CDR held; site2's lead comes (a takeover): the held ones
// are sent, then its next call. The receiver comes back and gets every
// event once, each with its PBX, in order per PBX.
func TestSendingPerPBX(t *testing.T) {
	r := newReceiver(t)
	r.stop()
	def, site2 := newPBX(t, nil), newPBX(t, nil)
	var leadDef, leadSite2 atomic.Bool
	leadDef.Store(true)
	s, err := New(def.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: t.TempDir(), Sending: leadDef.Load,
		PBXs: []PBX{{Name: "site2", State: site2.eng, Sending: leadSite2.Load}}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	def.play(loadAMI(t, "basic_call_caller_hangup"))
	site2.play(loadAMI(t, "basic_call_caller_hangup")) // led elsewhere: not sent
	caughtUp(t, s.readers[0], def)                     // the CDRs after the call events
	caughtUp(t, s.readers[1], site2)
	s.CDRs([]history.CDR{
		{UniqueID: "1796028439.12", LinkedID: "1796028439.11", Sequence: 1, Src: "201", Dst: "202"},
		{UniqueID: "site2:1796028439.12", LinkedID: "site2:1796028439.11", Sequence: 1, Src: "site2:201", Dst: "site2:202"},
	})
	waitStats(t, s, func(st Stats) bool { return st.Queued == 6 })
	if h := &s.readers[1].held; !h.holding.Load() {
		t.Fatal("site2's call is not held")
	}
	leadSite2.Store(true)
	site2.play(loadAMIRound(t, "basic_call_caller_hangup", 1)) // its wake sends the held ones
	waitStats(t, s, func(st Stats) bool { return st.Queued == 17 })
	r.restart()
	g := r.waitFor(t, 17, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	g = r.got()
	seen := map[string]bool{}
	byPBX := map[string][]want{}
	for _, e := range g {
		if seen[e.ID] {
			t.Errorf("%s delivered twice", e.ID)
		}
		seen[e.ID] = true
		ev := e.Event
		if q := strings.HasPrefix(ev.UniqueID, "site2:"); q != (ev.PBX == "site2") || !q && ev.PBX != "" {
			t.Errorf("event %s of pbx %q", e.ID, ev.PBX)
		}
		byPBX[ev.PBX] = append(byPBX[ev.PBX], want{strings.TrimPrefix(ev.Extension, "site2:"), ev.Type})
	}
	call := []want{{"202", "ringing"}, {"201", "answered"}, {"202", "answered"}, {"202", "hangup"}, {"201", "hangup"}}
	held := append(slices.Clone(call), want{"", "cdr"})
	for pbx, w := range map[string][]want{"": held, "site2": append(slices.Clone(held), call...)} {
		if !slices.Equal(byPBX[pbx], w) {
			t.Errorf("pbx %q: %v, want %v", pbx, byPBX[pbx], w)
		}
	}
	if st := s.Stats()[0]; st.Delivered != 17 || st.Dropped != 0 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestDrainOldQueues: a queue left by the version before, in which on
// the bus a named PBX had a service of its own (queues in
// <data-dir>/webhooks-<pbx>), is moved into the webhook's queue at New,
// in order and before what comes after, and its directory removed; the
// receiver gets each of its events once.
func TestDrainOldQueues(t *testing.T) {
	r := newReceiver(t)
	r.stop()
	data := t.TempDir()
	oldDir := filepath.Join(data, "webhooks-site2")
	site2 := newPBX(t, nil)
	// The earlier layout: site2's service, over an engine that never
	// changes, its queue in webhooks-site2; the receiver down.
	old, err := New(calls.New(calls.Config{}), []Config{hookConfig("crm", r.URL())}, Options{Dir: oldDir,
		PBXs: []PBX{{Name: "site2", State: site2.eng}}})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, old)
	site2.play(loadAMI(t, "basic_call_caller_hangup"))
	waitStats(t, old, func(st Stats) bool { return st.Queued == 5 })
	stop()

	def := newPBX(t, nil)
	s, err := New(def.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: filepath.Join(data, "webhooks"),
		PBXs: []PBX{{Name: "site2", State: site2.eng}}, Drain: []string{oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old queue's directory is still there: %v", err)
	}
	if st := s.Stats()[0]; st.Queued != 5 {
		t.Fatalf("after the move: %+v, want the 5 events queued", st)
	}
	start(t, s)
	def.play(loadAMI(t, "basic_call_caller_hangup"))
	r.restart()
	g := r.waitFor(t, 10, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	g = r.got()
	if len(g) != 10 {
		t.Fatalf("%d events, want 10: %v", len(g), ids(g))
	}
	for i, e := range g {
		if site := e.Event.PBX == "site2"; site != (i < 5) {
			t.Errorf("event %d %s of pbx %q: the old queue's 5 first", i, e.ID, e.Event.PBX)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids(g))))) != 10 {
		t.Errorf("repeated events: %v", ids(g))
	}
}
