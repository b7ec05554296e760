package main

// TestBrowserPopupAnswered: the incoming call pop-up against the fake
// bridge, which sends the events in an order the demo only sometimes gives.

import (
	"testing"
	"time"
)

// TestBrowserPopupAnswered: the pop-up shows while the operator's phone
// rings and goes when it is answered; an extenRinging that comes after the
// update saying the call was answered (the engine saw the PBX's ring and
// answer in one batch of events, and publishes the extensions before the
// rings) shows nothing, not even for a moment: the call is in progress.
func TestBrowserPopupAnswered(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	fb, b := startFake(t, 10, 1280, 720)
	eval[bool](b, recorderJS)
	wait := 5 * time.Second
	ring := func(caller string) fakeRaw {
		return fakeRaw{"extenRinging", map[string]any{"exten": "1000", "callerNum": caller, "callerName": "Peer " + caller,
			"queue": "", "convid": "c" + caller, "contact": map[string]string{"name": "Contact " + caller}}}
	}

	// Ringing, then answered.
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "ringing")}
	fb.raw <- ring("1250")
	b.waitFor("the pop-up for 1250", `!document.querySelector('#popup').hidden && document.querySelector('#popup-caller').textContent.includes('1250')`, wait)
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "busy")}
	b.waitFor("the pop-up gone once answered", `document.querySelector('#popup').hidden`, wait)

	// Answered, then the ring of that call; then another extension's
	// update, which the page handles after the ring.
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "online")}
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "busy")}
	fb.raw <- ring("1251")
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(5, "busy")}
	b.waitFor("1005 busy", cardIs("1005", "busy", ""), wait)
	if shown := eval[bool](b, `window.__rec.popup.some(p => p.shown && p.caller.includes('1251'))`); shown {
		t.Error("the pop-up showed for a call already answered")
	}
	if !eval[bool](b, `document.querySelector('#popup').hidden`) {
		t.Error("the pop-up is shown for a call already answered")
	}
}
