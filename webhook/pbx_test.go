package webhook

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
