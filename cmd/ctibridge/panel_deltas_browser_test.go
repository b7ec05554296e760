package main

import (
	"slices"
	"testing"
	"time"
)

// TestBrowserDeltasFallback: a server from before queue deltas closes a
// subscribe asking for them with 4004 and a reason naming the one it does
// not know; the panel subscribes again without that name (keeping the
// others), gets its snapshot, and takes the queues whole (queueUpdate).
func TestBrowserDeltasFallback(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	fb := newFakeBridge(4)
	fb.reject = "queues"
	fb.subs = make(chan []string, 16)
	_, b := startFakeBridge(t, fb, 1280, 720) // waits for the cards: a snapshot came
	var got [][]string
	for len(fb.subs) > 0 {
		got = append(got, <-fb.subs)
	}
	if len(got) < 2 || !slices.Contains(got[0], "queues") {
		t.Fatalf("subscribes' deltas %v: want one with queues, then one without", got)
	}
	if last := got[len(got)-1]; slices.Contains(last, "queues") || !slices.Contains(last, "trunks") || !slices.Contains(last, "status") {
		t.Errorf("the panel subscribed again with deltas %v, want trunks and status without queues", last)
	}
	fb.raw <- fakeRaw{typ: "queueUpdate", data: map[string]any{"queue": "401", "name": "401", "number": "401",
		"members": map[string]any{}, "waitingCallers": map[string]any{}, "completed": 7, "abandoned": 0, "holdTime": 0, "talkTime": 0}}
	b.tab("queues")
	b.waitFor("the queue whole on screen", `document.querySelector('#queues .queue')?.textContent.includes('7 answered')`, 10*time.Second)
}
