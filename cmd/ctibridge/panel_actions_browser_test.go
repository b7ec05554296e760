package main

// TestBrowserActions: every action of the operator panel performed against
// the demo (pbxsim and the bridge over real AMI), as the operator (phone
// 203, acting for 201-203) would: asserting the screen, then the state
// over REST. Where the simulated PBX refuses an action, the test asserts
// that the refusal reaches the screen in plain words, and logs it.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// rawWords are what must never reach the screen: the bridge's and
// Asterisk's own wording, meant for developers.
var rawWords = []string{"Invalid/unknown", "endpointId", "HTTP", "AMI", "Originate", "DBPut", "MixMonitor", "PJSIP/", "502", "ListCommands", "convid"}

// plainWords fails when a message shown to the user carries raw backend text.
func plainWords(t *testing.T, msg string) {
	t.Helper()
	if msg == "" {
		t.Error("empty message")
	}
	for _, w := range rawWords {
		if strings.Contains(msg, w) {
			t.Errorf("message %q shows backend text %q", msg, w)
		}
	}
}

// clearToast hides the last message, so that the next one can be told apart.
func (b *browser) clearToast() {
	b.t.Helper()
	eval[bool](b, `(() => { const t = document.querySelector('#toast'); t.hidden = true; t.textContent = ''; return true })()`)
}

// outcome waits for the message an action leaves and reports whether it
// was an error, with its text.
func (b *browser) outcome(what string) (failed bool, msg string) {
	b.t.Helper()
	b.waitFor("the outcome of "+what, `!document.querySelector('#toast').hidden && document.querySelector('#toast').textContent`, 15*time.Second)
	msg = eval[string](b, `document.querySelector('#toast').textContent`)
	failed = eval[bool](b, `document.querySelector('#toast').classList.contains('error')`)
	return failed, msg
}

// refused reports (and checks the words of) a refusal by the simulated
// PBX of the action posted to path.
func (b *browser) refused(t *testing.T, path string) bool {
	t.Helper()
	what := strings.TrimPrefix(path, "/astproxy/")
	failed, msg := b.outcome(what)
	if failed {
		b.allow(path)
		plainWords(t, msg)
		t.Logf("%s: the demo's PBX refused; the screen says %q", what, msg)
	}
	return failed
}

// menuAction opens the actions of exten's card and runs the one named role.
func (b *browser) menuAction(exten, role string) {
	b.t.Helper()
	b.clearToast()
	open := `!document.querySelector('#card-menu').hidden`
	for try := 0; ; try++ {
		b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#grid li[data-exten="%s"] .menu-btn`, exten))))
		if b.waitForMaybe(open, 2*time.Second) {
			break
		}
		if try == 2 {
			b.t.Fatalf("the menu of %s does not open", exten)
		}
		// Seen once in a full run, not reproduced: log it, try again.
		b.t.Logf("the menu of %s did not open on click %d", exten, try+1)
	}
	sel := fmt.Sprintf(`#card-menu [data-role="%s"]`, role)
	if !eval[bool](b, `!!document.querySelector('`+sel+`')`) {
		items := eval[string](b, `[...document.querySelectorAll('#card-menu [role="menuitem"]')].map(e => e.dataset.role).join(',')`)
		b.t.Fatalf("no %q in the menu of %s (it has: %s)", role, exten, items)
	}
	b.do(chromedp.Click(chromedp.CSS(sel)))
}

// demoEnv is a running demo with a logged-in panel.
type demoEnv struct {
	d     demoInfo
	b     *browser
	token string
	ctx   context.Context
}

func (e *demoEnv) ext(t *testing.T, exten string) restExt {
	t.Helper()
	return extOf(t, e.d.URL, e.token, exten)
}

// waitExt polls GET /astproxy/extension/{exten} until cond holds.
// connectedTo reports whether the extension talks with num.
func (r restExt) connectedTo(num string) bool {
	for _, c := range r.Conversations {
		if c.CounterpartNum == num && c.Connected {
			return true
		}
	}
	return false
}

func (e *demoEnv) waitExt(t *testing.T, exten, what string, cond func(restExt) bool) restExt {
	t.Helper()
	return pollREST(t, e.d.URL, e.token, "/astproxy/extension/"+exten, what, cond)
}

// connect has from call to and waits until both cards show the call.
func (e *demoEnv) connect(t *testing.T, from, to string) *callResult {
	t.Helper()
	pending := placeCall(e.ctx, e.d.Phones[from], to)
	c := waitCall(t, pending)
	// Busy and talking: the status may come before the bridge that makes
	// the conversation connected (the talk time shows only then).
	talking := func(x string) string { return cardIs(x, "busy", "") + " && (" + cardJS(x) + ").dur !== ''" }
	e.b.waitFor(from+" and "+to+" talking", talking(from)+" && "+talking(to), 10*time.Second)
	return c
}

// idle hangs up whatever the extensions still have, again while legs
// come and go (an originated leg cannot be hung up before it is answered),
// and waits for them to be free.
func (e *demoEnv) idle(t *testing.T, extens ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, x := range extens {
		for {
			convs := e.ext(t, x).Conversations
			if len(convs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still has %+v", x, convs)
			}
			for _, c := range convs {
				postTo(t, e.d.URL, e.token, "/astproxy/hangup", fmt.Sprintf(`{"convid":%q,"endpointId":%q}`, c.ID, x))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, x := range extens {
		e.b.waitFor(x+" available", cardIs(x, "online", ""), 10*time.Second)
	}
}

func startActions(t *testing.T, user string) *demoEnv {
	t.Helper()
	d := startDemo(t, 8, 1500*time.Millisecond)
	front := panelFront(t, d.URL)
	e := &demoEnv{d: d, token: restLogin(t, d.URL, user, user), ctx: context.Background()}
	e.b = newBrowser(t, 1280, 800)
	e.b.do(chromedp.Navigate(front.URL))
	e.b.login(user, user)
	e.b.waitFor("8 cards", `document.querySelectorAll('#grid li.card').length === 8`, 10*time.Second)
	return e
}

// TestBrowserActions: the actions on a colleague's card and on one's own
// calls and settings.
func TestBrowserActions(t *testing.T) {
	e := startActions(t, "operator")
	b := e.b
	b.run("pickup a ringing colleague", func(t *testing.T) { actPickup(t, e) })
	b.run("hang up a colleague", func(t *testing.T) { actHangup(t, e) })
	for _, role := range []string{"spy", "intrude", "whisper"} {
		b.run(role+" on a colleague", func(t *testing.T) { actSpy(t, e, role) })
	}
	b.run("park a colleague's call and pick it up", func(t *testing.T) { actPark(t, e) })
	b.run("record, pause and stop on a colleague's call", func(t *testing.T) { actRecord(t, e) })
	b.run("transfer by drag and drop onto a card", func(t *testing.T) { actDropTransfer(t, e) })
	b.run("attended transfer", func(t *testing.T) { actAttended(t, e) })
	b.run("DND and forward for oneself", func(t *testing.T) { actOwnSettings(t, e) })
	b.run("queue pause with a reason", func(t *testing.T) { actQueuePause(t, e) })
	b.run("DND for a colleague", func(t *testing.T) { actColleagueDND(t, e) })
}

// actPickup: the operator picks up 201 ringing from 204.
func actPickup(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	pending := placeCall(e.ctx, e.d.Phones["204"], "201")
	// 204 is outside the operator's groups: 201's card does not name it.
	b.waitFor("201 ringing", cardIs("201", "ringing", "private number"), wait)
	b.menuAction("201", "pickup")
	if !b.refused(t, "/astproxy/pickup_conv") {
		// The operator's phone is called to take it.
		e.waitExt(t, "203", "203 in a call", func(r restExt) bool { return len(r.Conversations) > 0 })
		b.waitFor("203 busy", `(`+cardJS("203")+`).status !== 'online'`, wait)
	}
	waitCall(t, pending)
	b.shot("action-pickup")
	e.idle(t, "201", "203", "204")
}

// actHangup: the operator hangs up 202's call with 201.
func actHangup(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	e.connect(t, "201", "202")
	b.menuAction("202", "hangup")
	if !b.refused(t, "/astproxy/hangup") {
		b.waitFor("202 available", cardIs("202", "online", ""), wait)
		b.waitFor("201 available", cardIs("201", "online", ""), wait)
		e.waitExt(t, "201", "201 idle", func(r restExt) bool { return len(r.Conversations) == 0 })
	}
	e.idle(t, "201", "202")
}

// actSpy: the operator listens to (spy), intrudes on or whispers into
// 201's call with 202.
func actSpy(t *testing.T, e *demoEnv, role string) {
	b, wait := e.b, 10*time.Second
	e.connect(t, "201", "202")
	b.menuAction("201", role)
	if !b.refused(t, "/astproxy/"+map[string]string{"spy": "start_spy", "intrude": "intrude", "whisper": "whisper"}[role]) {
		// The operator's phone is called for the session; its
		// conversation names 201, never the phone itself (pbxsim
		// answers the ChanSpy leg itself, so no "spy" field yet).
		x := e.waitExt(t, "203", "the operator's phone in the "+role+" session", func(r restExt) bool { return len(r.Conversations) > 0 })
		for _, c := range x.Conversations {
			if c.CounterpartNum != "201" || (c.Spy != nil && c.Spy.Exten != "201") {
				t.Errorf("203's %s conversation: %+v (spy %+v), want 201 as the other party", role, c, c.Spy)
			}
			if want := map[string]string{"spy": "listen", "intrude": "barge", "whisper": "whisper"}[role]; c.Spy != nil && c.Spy.Mode != want {
				t.Errorf("203's %s conversation has spy mode %q, want %q", role, c.Spy.Mode, want)
			}
		}
		b.waitFor("203 busy", `(`+cardJS("203")+`).status !== 'online'`, wait)
		b.waitFor("203's card never shows itself as its own counterpart", `!(`+cardJS("203")+`).peer.includes('203')`, wait)
		b.shot("action-" + role)
	}
	e.idle(t, "201", "202", "203")
}

// actPark: the operator parks 202's caller (201) from 202's card, then picks it up from the parking view.
func actPark(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	e.connect(t, "201", "202")
	b.menuAction("202", "park")
	if b.refused(t, "/astproxy/park") {
		e.idle(t, "201", "202")
		return
	}
	pollREST(t, e.d.URL, e.token, "/astproxy/parkings", "201 parked", func(p map[string]struct{ ParkedCaller *struct{ Num string } }) bool {
		for _, s := range p {
			if s.ParkedCaller != nil && s.ParkedCaller.Num == "201" {
				return true
			}
		}
		return false
	})
	// The conversation's "parked" field: 201's card says parked, where.
	x := e.ext(t, "201")
	for _, c := range x.Conversations {
		if c.Parked == nil {
			t.Errorf("201's conversation has no parked field: %+v", c)
		} else {
			b.waitFor("201's card says parked", cardIs("201", "parked", "")+` && document.querySelector('#grid li[data-exten="201"] .card-note').textContent.includes('`+c.Parked.Parking+`')`, wait)
		}
	}
	b.shot("action-park-card")
	b.tab("queues")
	b.waitFor("201 in the parking view", `[...document.querySelectorAll('#parkings .parking.taken')].some(p => p.textContent.includes('201'))`, wait)
	b.waitFor("the countdown", `/\d:\d\d/.test(document.querySelector('#parkings .parking.taken .left')?.textContent)`, wait)
	b.shot("action-park-view")
	b.clearToast()
	b.do(chromedp.Click(chromedp.CSS(`#parkings .parking.taken button[data-role="pickup"]`)))
	if !b.refused(t, "/astproxy/pickup_parking") {
		e.waitExt(t, "203", "203 with 201", func(r restExt) bool {
			for _, c := range r.Conversations {
				if c.CounterpartNum == "201" && c.Connected {
					return true
				}
			}
			return false
		})
		b.waitFor("the parking free", `!document.querySelector('#parkings .parking.taken')`, wait)
	}
	b.tab("ext")
	e.idle(t, "201", "202", "203")
}

// actRecord: the operator records 201's call, pauses and stops the recording.
func actRecord(t *testing.T, e *demoEnv) {
	b := e.b
	e.connect(t, "201", "202")
	steps := []struct{ role, path, want, badge string }{
		{"rec", "start_record", "true", "● REC"}, {"muterec", "mute_record", "mute", "REC paused"}, {"stoprec", "stop_record", "false", ""}}
	for _, s := range steps {
		b.menuAction("201", s.role)
		if b.refused(t, "/astproxy/"+s.path) {
			break
		}
		e.waitExt(t, "201", "recording "+s.want, func(r restExt) bool {
			for _, c := range r.Conversations {
				return c.Recording == s.want
			}
			return false
		})
		// The card shows it (and the next menu is built from it).
		b.waitFor("201's card: "+s.want, fmt.Sprintf(`(document.querySelector('#grid li[data-exten="201"] .ind-rec')?.textContent || '') === %q`, s.badge), 10*time.Second)
	}
	e.idle(t, "201", "202")
}

// actDropTransfer: 205 calls the operator, who drops the call on 202's card.
func actDropTransfer(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	e.connect(t, "205", "203")
	b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected')`, wait)
	b.clearToast()
	eval[bool](b, `(() => {
			const row = document.querySelector('#mycalls .call-row.connected');
			const card = document.querySelector('#grid li[data-exten="202"]');
			const dt = new DataTransfer();
			row.dispatchEvent(new DragEvent('dragstart', {bubbles: true, dataTransfer: dt}));
			card.dispatchEvent(new DragEvent('dragover', {bubbles: true, cancelable: true, dataTransfer: dt}));
			card.dispatchEvent(new DragEvent('drop', {bubbles: true, cancelable: true, dataTransfer: dt}));
			return true })()`)
	if !b.refused(t, "/astproxy/blindtransfer") {
		b.waitFor("202 busy", cardIs("202", "busy", ""), 15*time.Second)
		e.waitExt(t, "202", "202 with 205", func(r restExt) bool {
			for _, c := range r.Conversations {
				return c.CounterpartNum == "205" && c.Connected
			}
			return false
		})
		b.waitFor("203 free", cardIs("203", "online", ""), wait)
	}
	e.idle(t, "202", "203", "205")
}

// actAttended: 206 calls the operator, who transfers it to 202 attended.
func actAttended(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	e.connect(t, "206", "203")
	b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected')`, wait)
	b.clearToast()
	b.do(chromedp.SendKeys(chromedp.CSS(`#mycalls .call-row input.xfer-to`), "202"),
		chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="atxfer"]`)))
	if !b.refused(t, "/astproxy/atxfer") {
		// While consulting, the calls bar offers complete and cancel
		// (with the conversations' "transfer" field).
		if b.waitForMaybe(`document.querySelector('#mycalls button[data-role="complete"]')`, wait) {
			// Complete waits for the target: a button read enabled while
			// 202 still rings afterwards was enabled while it rang.
			if eval[bool](b, `!document.querySelector('#mycalls button[data-role="complete"]').disabled`) && !e.ext(t, "202").connectedTo("203") {
				t.Error("Complete offered while the target still rings")
			}
			// As a receptionist does: announce the call to 202 before
			// completing (completing while 202 still rings is a "blond"
			// transfer, which pbxsim does not simulate).
			e.waitExt(t, "202", "202 answering the consult", func(r restExt) bool { return r.connectedTo("203") })
			b.waitFor("Complete offered once 202 answered", `!document.querySelector('#mycalls button[data-role="complete"]').disabled`, wait)
			b.shot("action-atxfer-consulting")
			b.clearToast()
			b.do(chromedp.Click(chromedp.CSS(`#mycalls button[data-role="complete"]`)))
			if !b.refused(t, "/astproxy/atxfer_complete") {
				e.waitExt(t, "202", "202 with 206", func(r restExt) bool {
					for _, c := range r.Conversations {
						return c.CounterpartNum == "206"
					}
					return false
				})
			}
		} else {
			t.Log("no consult state on screen: the server sends no conversation \"transfer\" field")
		}
	}
	e.idle(t, "202", "203", "206")
}

// actOwnSettings: the operator turns DND and a forward on and off.
func actOwnSettings(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	b.clearToast()
	b.do(chromedp.Click(chromedp.CSS("#me-dnd")))
	if !b.refused(t, "/astproxy/dnd") {
		e.waitExt(t, "203", "DND on", func(r restExt) bool { return r.DND })
		b.waitFor("DND pressed", `document.querySelector('#me-dnd').getAttribute('aria-pressed') === 'true'`, wait)
		b.waitFor("203's card says DND", `document.querySelector('#grid li[data-exten="203"] .ind-dnd')`, wait)
		b.clearToast()
		b.do(chromedp.Click(chromedp.CSS("#me-dnd")))
		b.refused(t, "/astproxy/dnd")
		e.waitExt(t, "203", "DND off", func(r restExt) bool { return !r.DND })
	}
	b.clearToast()
	b.do(chromedp.SendKeys(chromedp.CSS("#me-cf"), "0721405516"), chromedp.Click(chromedp.CSS("#me-cf-btn")))
	if !b.refused(t, "/astproxy/cfcall") {
		e.waitExt(t, "203", "forward set", func(r restExt) bool { return r.CF == "0721405516" })
		b.waitFor("203's card shows the forward", `document.querySelector('#grid li[data-exten="203"] .ind-cf')?.textContent.includes('0721405516')`, wait)
		b.clearToast()
		b.do(chromedp.Click(chromedp.CSS("#me-cf-btn")))
		b.refused(t, "/astproxy/cfcall")
		e.waitExt(t, "203", "forward off", func(r restExt) bool { return r.CF == "" })
	}
}

// actQueuePause: the operator pauses in the support queue for lunch.
func actQueuePause(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	b.tab("queues")
	row := `#queues .member[data-member="203"]`
	b.waitFor("203 in the support queue", `document.querySelector('`+row+` button[data-role="pause"]')`, wait)
	b.clearToast()
	b.do(chromedp.SendKeys(chromedp.CSS(row+" input.reason"), "lunch"), chromedp.Click(chromedp.CSS(row+` button[data-role="pause"]`)))
	b.waitFor("paused (lunch) on screen", `document.querySelector('`+row+`')?.textContent.includes('lunch')`, wait)
	// How long it has been paused, from the pause's start (lastPause).
	b.waitFor("the pause's time ticking", `/^0:0[0-9]$/.test(document.querySelector('`+row+` .paused-for')?.textContent)`, 4*time.Second)
	type member struct {
		Paused       bool
		PausedReason string
		LastPause    int64
	}
	pollREST(t, e.d.URL, e.token, "/astproxy/queues", "203 paused for lunch", func(qs map[string]struct{ Members map[string]member }) bool {
		for _, q := range qs {
			if m, ok := q.Members["203"]; ok {
				return m.Paused && m.PausedReason == "lunch" && time.Since(time.UnixMilli(m.LastPause)).Abs() < time.Minute
			}
		}
		return false
	})
	b.shot("action-queue-pause")
	b.do(chromedp.Click(chromedp.CSS(row + ` button[data-role="unpause"]`)))
	b.waitFor("unpaused", `document.querySelector('`+row+` button[data-role="pause"]')`, wait)
	if eval[bool](b, `!!document.querySelector('`+row+` .paused-for')`) {
		t.Error("the pause's time still shown after the unpause")
	}
	b.tab("ext")
}

// actColleagueDND: the operator sets and clears DND on 202 from its card.
func actColleagueDND(t *testing.T, e *demoEnv) {
	b := e.b
	b.menuAction("202", "dndon")
	if b.refused(t, "/astproxy/dnd") {
		return
	}
	e.waitExt(t, "202", "202 in DND", func(r restExt) bool { return r.DND })
	b.waitFor("202's card says DND", cardIs("202", "dnd", "")+` && document.querySelector('#grid li[data-exten="202"] .ind-dnd')`, 10*time.Second)
	b.menuAction("202", "dndoff")
	b.refused(t, "/astproxy/dnd")
	e.waitExt(t, "202", "202 out of DND", func(r restExt) bool { return !r.DND })
	b.waitFor("202 available", cardIs("202", "online", ""), 10*time.Second)
}

// waitForMaybe is waitFor that reports a timeout instead of failing.
func (b *browser) waitForMaybe(expr string, timeout time.Duration) bool {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if eval[bool](b, "!!("+expr+")") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
