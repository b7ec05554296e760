package main

// TestBrowserPopupAnswered: the incoming call pop-up against the fake
// bridge, which sends the events in an order the demo only sometimes gives.

import (
	"strings"
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
	if !eval[bool](b, `document.querySelector('#popup-card').hidden`) {
		t.Error("a customer card link with no --popup-link")
	}
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

// ringStubsJS replaces the browser's Notification and AudioContext with
// recorders (headless Chromium has no sound card and no desktop), and
// forgets that notifications were asked for.
const ringStubsJS = `(() => {
	localStorage.removeItem('ctibridge.notifyAsked');
	const r = window.__ring = {asked: 0, notes: [], closed: 0, tones: 0, stopped: 0, bursts: 0};
	window.Notification = class {
		static permission = 'default';
		static requestPermission() { r.asked++; this.permission = 'granted'; return Promise.resolve('granted'); }
		constructor(title, o) { r.notes.push(title + ' | ' + (o && o.body)); }
		close() { r.closed++; }
	};
	window.AudioContext = class {
		constructor() { this.state = 'running'; this.currentTime = 0; this.destination = {}; }
		resume() { return Promise.resolve(); }
		createOscillator() { return {frequency: {value: 0}, connect: (g) => g, start() { r.tones++; }, stop() { r.stopped++; }}; }
		createGain() { return {gain: {value: 0, setValueAtTime() { r.bursts++; }}, connect: (d) => d}; }
	};
	return true;
})()`

// TestBrowserRingAlerts: a ring to the user's phone is not missed. The
// first click asks for desktop notifications; the ring then shows one,
// starts the ring tone and puts the caller in the tab's title; the answer
// stops all three.
func TestBrowserRingAlerts(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	fb, b := startFake(t, 10, 1280, 720)
	eval[bool](b, ringStubsJS)
	wait := 5 * time.Second
	base := eval[string](b, `document.title`)
	eval[bool](b, `document.dispatchEvent(new MouseEvent('click', {bubbles: true})), true`)
	b.waitFor("notifications asked for at the first click", `window.__ring.asked === 1`, wait)

	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "ringing")}
	fb.raw <- fakeRaw{"extenRinging", map[string]any{"exten": "1000", "callerNum": "1250", "callerName": "Peer 1250",
		"queue": "", "convid": "c1250", "contact": map[string]string{"name": "Contact 1250"}}}
	b.waitFor("the pop-up", `!document.querySelector('#popup').hidden`, wait)
	b.waitFor("the tone", `window.__ring.tones === 1 && window.__ring.bursts >= 4`, wait)
	if got := eval[string](b, `window.__ring.notes.join(';')`); !strings.Contains(got, "Peer 1250 (1250)") {
		t.Errorf("notifications %q, want one naming Peer 1250 (1250)", got)
	}
	if got := eval[string](b, `document.title`); got != "☎ Peer 1250 (1250) · "+base {
		t.Errorf("title %q while ringing", got)
	}

	fb.raw <- fakeRaw{"extenUpdate", fakeExt(0, "busy")}
	b.waitFor("the pop-up gone once answered", `document.querySelector('#popup').hidden`, wait)
	if !eval[bool](b, `window.__ring.stopped === 1 && window.__ring.closed === 1`) {
		t.Errorf("after the answer: %s", eval[string](b, `JSON.stringify(window.__ring)`))
	}
	if got := eval[string](b, `document.title`); got != base {
		t.Errorf("title %q after the answer, want %q", got, base)
	}
}

// TestBrowserCompactStatusWords: in compact mode a card in a call says
// its status in words before the call (ringing, busy), not by colour
// only.
func TestBrowserCompactStatusWords(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	fb, b := startFake(t, 10, 1280, 720)
	eval[bool](b, `document.documentElement.classList.add('compact'), true`)
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(1, "ringing")}
	fb.raw <- fakeRaw{"extenUpdate", fakeExt(2, "busy")}
	before := func(exten string) string {
		return `getComputedStyle(document.querySelector('#grid li[data-exten="` + exten + `"] .card-call'), '::before').content`
	}
	b.waitFor("1001 says ringing", before("1001")+` === '"Ringing · "'`, 5*time.Second)
	b.waitFor("1002 says busy", before("1002")+` === '"Busy · "'`, 5*time.Second)
}
