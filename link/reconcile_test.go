package link_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/link"
)

// TestReconcileEveryPeriod holds a ghost call past two drift checks: the
// first check finds the call still up on the PBX and repairs nothing; the
// call then ends without its hang-up events reaching the bridge, and the
// next check removes it. Every period runs a check, whatever came before,
// and only the check's corrections count as drift.
func TestReconcileEveryPeriod(t *testing.T) {
	const every = 100 * time.Millisecond
	h := startWith(t, link.Config{RetryDelay: 20 * time.Millisecond, ReconcileEvery: every})
	var mu sync.Mutex
	var listed []ami.Message
	h.srv.Handle("CoreShowChannels", func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		mu.Lock()
		defer mu.Unlock()
		out := []ami.Message{amitest.Response("Success", "EventList", "start", "Message", "Channels will follow")}
		out = append(out, listed...)
		return append(out, amitest.Event("CoreShowChannelsComplete", "EventList", "Complete"))
	})
	waitFor(t, h.eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })

	// The call of status_actions_during_call, 201 talking to 202, as its
	// CoreShowChannel items describe it: the PBX lists it while it lasts.
	var items []ami.Message
	for _, m := range recording(t, "status_actions_during_call.ami") {
		if m.Event() == "CoreShowChannel" && (m.Get("Channel") == "PJSIP/201-00000036" || m.Get("Channel") == "PJSIP/202-00000037") {
			items = append(items, m)
		}
	}
	if len(items) != 2 {
		t.Fatalf("recording has %d items of the 201-202 call, want 2", len(items))
	}
	mu.Lock()
	listed = items
	mu.Unlock()
	// The bridge learns of the call from the check itself: that is a repair
	// (a call it never heard of), so wait for the check and the call.
	waitFor(t, h.eng, "the call found by a drift check", func(s state) bool {
		return len(s.Extensions["201"].Conversations) == 1
	})
	first := h.link.Stats()
	if first.Reconciles == 0 || h.link.Stats().Engine.DriftRepairs == 0 {
		t.Fatalf("after the first check: %d checks, %d repairs", first.Reconciles, h.link.Stats().Engine.DriftRepairs)
	}
	// A check that finds everything right repairs nothing.
	waitStats(t, h.link, "a second check", func(s link.Stats) bool { return s.Reconciles >= first.Reconciles+1 })
	steady := h.link.Stats().Engine.DriftRepairs

	// The call ends on the PBX; its hang-ups never reach the bridge.
	mu.Lock()
	listed = nil
	mu.Unlock()
	waitFor(t, h.eng, "the ghost removed by a later check", func(s state) bool {
		return len(s.Extensions["201"].Conversations) == 0 && len(s.Extensions["202"].Conversations) == 0
	})
	if got := h.link.Stats().Engine.DriftRepairs; got <= steady {
		t.Errorf("drift repairs %d after the ghost went, want more than %d", got, steady)
	}
	if got := h.link.Stats().Reconciles; got < first.Reconciles+2 {
		t.Errorf("reconciles %d, want at least %d", got, first.Reconciles+2)
	}
	if got := h.link.Stats().Resyncs; got != 1 {
		t.Errorf("resyncs %d, want 1: a drift check is not a resync", got)
	}
}

// TestResyncIsNotDrift: the first resync of a connection loads the calls
// already up; it repairs nothing and the drift counter stays at 0.
func TestResyncIsNotDrift(t *testing.T) {
	h := startWith(t, link.Config{RetryDelay: 20 * time.Millisecond, ReconcileEvery: -1})
	var items []ami.Message
	for _, m := range recording(t, "status_actions_during_call.ami") {
		if m.Event() == "CoreShowChannel" {
			items = append(items, m)
		}
	}
	listReply(h.srv, "CoreShowChannels", "CoreShowChannelsComplete", items...)
	h.srv.Drop() // reconnect: the resync lists the calls
	waitFor(t, h.eng, "calls loaded by the resync", func(s state) bool {
		return s.PBX.PBX == "live" && len(s.Extensions["201"].Conversations) == 1
	})
	if got := h.link.Stats().Engine.DriftRepairs; got != 0 {
		t.Errorf("drift repairs %d after a resync load, want 0", got)
	}
	if got := h.link.Stats().Engine.ResyncLoads; got == 0 {
		t.Error("resync changes 0, want the loaded channels counted")
	}
}

// waitStats polls the link's counters until ok holds.
func waitStats(t *testing.T, l *link.Link, what string, ok func(link.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok(l.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, l.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
