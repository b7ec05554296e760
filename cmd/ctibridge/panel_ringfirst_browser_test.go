package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserRingBeforeLogin: a call that rings the operator's phone
// before the panel's socket subscribed (its extenRinging went to nobody)
// gets the pop-up and the ring alerts from the snapshot: the caller, the
// title badge, the tone.
func TestBrowserRingBeforeLogin(t *testing.T) {
	d := startDemoWith(t, 4, 8*time.Second, nil)
	front := panelFront(t, d.URL)
	wait := 10 * time.Second
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.waitFor("login form", `!!document.querySelector('#login-user')`, wait)
	eval[bool](b, ringStubsJS)
	base := eval[string](b, `document.title`)

	// 201 calls the operator's phone (203), which rings for 8 s.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pending := placeCall(ctx, d.Phones["201"], "203")
	admin := restLogin(t, d.URL, "admin", "admin")
	pollREST(t, d.URL, admin, "/astproxy/extensions", "203 ringing", func(x map[string]restExt) bool { return x["203"].Status == "ringing" })

	b.login("operator", "operator")
	b.waitFor("the pop-up for 201", `!document.querySelector('#popup').hidden && document.querySelector('#popup-caller').textContent.includes('(201)')`, wait)
	b.waitFor("the tone", `window.__ring.tones === 1 && window.__ring.bursts >= 4`, wait)
	caller := eval[string](b, `document.querySelector('#popup-caller').textContent`)
	if got := eval[string](b, `document.title`); got != "☎ "+caller+" · "+base {
		t.Errorf("title %q while ringing, want the badge with %q", got, caller)
	}
	b.shot("ring-before-login")

	call := waitCall(t, pending)
	b.waitFor("the pop-up gone once answered", `document.querySelector('#popup').hidden`, wait)
	if got := eval[string](b, `document.title`); got != base {
		t.Errorf("title %q after the answer, want %q", got, base)
	}
	call.hangup(t)
}

// TestBrowserRingResync: every snapshot (the fake bridge sends a fresh
// one at each connection, as after a resync that could not resume) with
// the user's phone ringing starts the pop-up and the alerts once: not
// again while they show, nor after the user dismissed that ring.
func TestBrowserRingResync(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	fb := newFakeBridge(10)
	fb.ringIn = true
	front := startFront(t, fb.handler())
	b := newBrowser(t, 1280, 720)
	b.allow("/phonebook/lookup/") // the fake has no phonebook
	b.do(chromedp.Navigate(front.URL))
	b.waitFor("login form", `!!document.querySelector('#login-user')`, 10*time.Second)
	eval[bool](b, ringStubsJS)
	base := eval[string](b, `document.title`)
	b.login("op", "op")
	wait := 5 * time.Second
	b.waitFor("the pop-up from the snapshot", `!document.querySelector('#popup').hidden && document.querySelector('#popup-caller').textContent === 'Peer 1250 (1250)'`, wait)
	b.waitFor("the tone", `window.__ring.tones === 1`, wait)
	if got := eval[string](b, `document.title`); got != "☎ Peer 1250 (1250) · "+base {
		t.Errorf("title %q while ringing", got)
	}

	// resync drops the socket and waits for the next snapshot.
	resync := func(what string) {
		t.Helper()
		n := len(b.wsFrames())
		front.ln.cut()
		deadline := time.Now().Add(10 * time.Second)
		for !snapshotSince(b.wsFrames(), n) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no new snapshot", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the page handles it
	}
	resync("while the pop-up shows")
	if got := eval[string](b, `JSON.stringify(window.__ring)`); !eval[bool](b, `window.__ring.tones === 1 && window.__ring.stopped === 0 && !document.querySelector('#popup').hidden`) {
		t.Errorf("a snapshot while the pop-up shows: %s", got)
	}
	b.do(chromedp.Click(chromedp.CSS("#popup-close")))
	b.waitFor("dismissed", `document.querySelector('#popup').hidden && window.__ring.stopped === 1`, wait)
	resync("after the dismissal")
	if got := eval[string](b, `JSON.stringify(window.__ring)`); !eval[bool](b, `window.__ring.tones === 1 && document.querySelector('#popup').hidden`) {
		t.Errorf("a snapshot after the dismissal rang again: %s", got)
	}
}

// snapshotSince reports a snapshot among the frames after the first n.
func snapshotSince(frames []wsFrame, n int) bool {
	for _, f := range frames[n:] {
		if f.Op == "snapshot" {
			return true
		}
	}
	return false
}
