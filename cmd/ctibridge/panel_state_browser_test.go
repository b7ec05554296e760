package main

// Browser tests of what the cards say (redaction, no bare arrows, plain
// words), of the language switch, the trunks view and of the main flows
// done with the keyboard only, against the demo.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ctibridge/ctibridge/pbxsim"
)

// noBareArrowJS: every card that shows a call names its other party (a
// name, a number, or the words for a hidden one), never an empty line.
const noBareArrowJS = `[...document.querySelectorAll('#grid li.card')].every(li =>
	li.querySelector('.card-call').hidden || li.querySelector('.peer').textContent.trim() !== '')`

// TestBrowserStateTruth: what each user's cards say of the same calls.
func TestBrowserStateTruth(t *testing.T) {
	d := startDemo(t, 8, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	ctx := context.Background()
	open := func(user string) *browser {
		b := newBrowser(t, 1280, 800)
		b.do(chromedp.Navigate(front.URL))
		b.login(user, user)
		b.waitFor("8 cards", `document.querySelectorAll('#grid li.card').length === 8`, 10*time.Second)
		return b
	}
	op, alice := open("operator"), open("alice")
	wait := 10 * time.Second

	// 201 (in the operator's groups) calls 205 (outside them): 205's card
	// hides whom it talks to, so 201's card does not name 205 either.
	call := waitCall(t, placeCall(ctx, d.Phones["201"], "205"))
	op.waitFor("201 busy, other party hidden", cardIs("201", "busy", "private number"), wait)
	op.waitFor("205 busy, other party hidden", cardIs("205", "busy", "private number"), wait)
	op.waitFor("no bare arrow", noBareArrowJS, wait)
	// Alice owns 201: her own card names whom she talks to.
	alice.waitFor("Alice's own card names 205", cardIs("201", "busy", "205"), wait)
	alice.waitFor("no bare arrow", noBareArrowJS, wait)
	op.shot("redaction-operator")
	alice.shot("redaction-alice")
	call.hangup(t)

	// 203 calls 204: neither is Alice's; both her cards say "private number".
	call = waitCall(t, placeCall(ctx, d.Phones["203"], "204"))
	alice.waitFor("203 busy, hidden", cardIs("203", "busy", "private number")+" && "+cardIs("204", "busy", "private number"), wait)
	op.waitFor("the operator sees 203 with 204", cardIs("203", "busy", "204"), wait)
	// Actions follow /user/me: Alice may do nothing on 203's call, the
	// operator (203 is in his groups) may hang it up, listen, park...
	menuRoles := func(b *browser, exten string) string {
		b.do(chromedp.Click(chromedp.CSS(`#grid li[data-exten="` + exten + `"] .menu-btn`)))
		b.waitFor("the menu", `!document.querySelector('#card-menu').hidden`, wait)
		roles := eval[string](b, `[...document.querySelectorAll('#card-menu [role="menuitem"]')].map(e => e.dataset.role).join(',')`)
		b.do(chromedp.KeyEvent(kb.Escape))
		return roles
	}
	if got := menuRoles(alice, "203"); got != "close" {
		t.Errorf("Alice's menu on 203's call offers %q, want nothing", got)
	}
	// The operator is in that call himself: he may transfer it onto any
	// card, or to its voicemail box (every demo phone has one) and to its
	// user's mobile (Alice's, not 204's); nothing else on 204 (outside his
	// groups); DND and forward on idle 201 (in his groups).
	if got := menuRoles(op, "204"); got != "xferhere,xfervm,close" {
		t.Errorf("the operator's menu on 204 offers %q, want only the transfers of his call", got)
	}
	if got := menuRoles(op, "201"); got != "xferhere,xfervm,xfermobile,dndon,cfon,close" {
		t.Errorf("the operator's menu on idle 201 offers %q, want the transfer of his call, DND and forward", got)
	}
	call.hangup(t)
	alice.waitFor("203 available", cardIs("203", "online", ""), wait)

	// Alice is not in the support queue: she may log in to it and out.
	alice.tab("queues")
	alice.waitFor("Log in (201)", `document.querySelector('#queues button[data-role="qlogin"]')`, wait)
	alice.clearToast()
	alice.do(chromedp.Click(chromedp.CSS(`#queues button[data-role="qlogin"]`)))
	if !alice.refused(t, "/astproxy/queuemember_add") {
		alice.waitFor("Alice a member", `document.querySelector('#queues .member[data-member="201"]')`, wait)
		// Since when: pbxsim's QueueMemberAdded carries LoginTime.
		alice.waitFor("her login time", `document.querySelector('#queues .member[data-member="201"] .name')?.title.startsWith('logged in at ')`, wait)
		token := restLogin(t, d.URL, "alice", "alice")
		pollREST(t, d.URL, token, "/astproxy/queues", "201 in the queue", func(qs map[string]struct{ Members map[string]any }) bool {
			for _, q := range qs {
				if _, ok := q.Members["201"]; ok {
					return true
				}
			}
			return false
		})
		alice.clearToast()
		alice.do(chromedp.Click(chromedp.CSS(`#queues .member[data-member="201"] button[data-role="qlogout"]`)))
		if !alice.refused(t, "/astproxy/queuemember_remove") {
			// The queue's change removes her; no member update puts her back.
			alice.waitFor("Alice no longer a member", `!document.querySelector('#queues .member[data-member="201"]')`, wait)
		}
	}

	// Alice sends her calls to voicemail (presence, over REST): every
	// screen shows it on her card, in words.
	aliceToken := restLogin(t, d.URL, "alice", "alice")
	postTo(t, d.URL, aliceToken, "/user/presence", `{"status":"voicemail"}`)
	op.waitFor("201 forwards to voicemail", `document.querySelector('#grid li[data-exten="201"] .ind-cf')?.textContent === '→ voicemail'`, wait)
	op.shot("presence-voicemail")
	postTo(t, d.URL, aliceToken, "/user/presence", `{"status":"online"}`)
	op.waitFor("201 without forward", `!document.querySelector('#grid li[data-exten="201"] .ind')`, wait)

	// The admin has no phone: Call says so in plain words, and nothing is
	// sent to the PBX.
	admin := open("admin")
	admin.clearToast()
	admin.do(chromedp.Click(chromedp.CSS(`#grid li[data-exten="202"] button.call-btn`)))
	failed, msg := admin.outcome("the admin's call")
	if !failed || msg != "You have no phone to call from" {
		t.Errorf("the admin's Call says %q (error %v), want the plain words", msg, failed)
	}
	admin.shot("admin-no-phone")
}

// TestBrowserLanguage: English by default, Italian from the browser's
// language, and a switch that is kept across reloads.
func TestBrowserLanguage(t *testing.T) {
	d := startDemo(t, 4, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.waitFor("English login", `document.querySelector('#login-form button[type="submit"]').textContent === 'Log in'`, 10*time.Second)
	b.login("operator", "operator")
	b.waitFor("English cards", `document.querySelector('#tab-ext').textContent === 'Extensions' && `+cardIs("201", "online", ""), 10*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS("#pref-lang"), "it"))
	eval[bool](b, `(document.querySelector('#pref-lang').dispatchEvent(new Event('change')), true)`)
	italian := `document.documentElement.lang === 'it' && document.querySelector('#tab-ext').textContent === 'Interni' &&
		document.querySelector('#grid li[data-exten="201"] .card-state')?.textContent === 'Disponibile' &&
		document.querySelector('#ext-count').textContent === '4 interni'`
	b.waitFor("Italian everywhere", italian, 5*time.Second)
	b.shot("italian")
	b.do(chromedp.Reload())
	b.waitFor("Italian after a reload", italian, 10*time.Second)

	// A new browser whose language is Italian starts in Italian.
	it := newBrowser(t, 1280, 800)
	if _, err := chromedp.Call(it.ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
		UserAgent: "Mozilla/5.0 (X11; Linux x86_64) ctibridge-test", AcceptLanguage: "it-IT,it"}); err != nil {
		t.Fatal(err)
	}
	it.do(chromedp.Navigate(front.URL))
	it.waitFor("Italian login", `document.querySelector('#login-form button[type="submit"]').textContent === 'Accedi'`, 10*time.Second)
}

// TestBrowserTrunks: a call from outside arrives on the trunk; the trunks
// view shows it registered or not, one channel in use and the live call.
func TestBrowserTrunks(t *testing.T) {
	d := startDemo(t, 4, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	token := restLogin(t, d.URL, "operator", "operator")
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("operator", "operator")
	b.tab("trunks")
	b.waitFor("the trunk listed", `document.querySelector('#trunks tr[data-trunk] .chans')?.textContent === '0'`, 10*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// A phone the PBX does not know: its call comes in on the trunk.
	outside, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: "0721405516", Server: d.PBX.SIPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	go outside.Run(ctx)
	call := waitCall(t, placeCall(ctx, outside, "201"))
	b.waitFor("one channel in use and the call", `document.querySelector('#trunks tr[data-trunk] .chans')?.textContent === '1' &&
		document.querySelector('#trunks tr[data-trunk] .trunk-calls')?.textContent.includes('201')`, 10*time.Second)
	b.shot("trunks")
	// Click-to-call from the number on 201's card (its caller).
	b.tab("ext")
	b.waitFor("201 with the outside caller", cardIs("201", "busy", "0721405516"), 10*time.Second)
	b.menuAction("201", "callpeer")
	if !b.refused(t, "/astproxy/call") {
		pollREST(t, d.URL, token, "/astproxy/extension/203", "the operator's phone calling", func(x restExt) bool { return len(x.Conversations) > 0 })
		for _, c := range extOf(t, d.URL, token, "203").Conversations {
			postTo(t, d.URL, token, "/astproxy/hangup", `{"convid":"`+c.ID+`","endpointId":"203"}`)
		}
	}
	b.tab("trunks")
	pollREST(t, d.URL, token, "/astproxy/trunks", "a call on the trunk", func(trs map[string]struct{ Conversations map[string]any }) bool {
		for _, tr := range trs {
			if len(tr.Conversations) == 1 {
				return true
			}
		}
		return false
	})
	call.hangup(t)
	b.waitFor("the trunk free", `document.querySelector('#trunks tr[data-trunk] .chans')?.textContent === '0'`, 10*time.Second)

	// The bridge has conferences (its /openapi.yaml lists them): the tab
	// is there; the demo's PBX has no ConfBridge, so no room.
	b.tab("confs")
	b.waitFor("the conferences view", `document.querySelector('#confs').textContent === 'No conferences.'`, 10*time.Second)
	var rooms map[string]any
	restGet(t, d.URL, token, "/astproxy/conferences", &rooms)
	if len(rooms) != 0 {
		t.Errorf("conferences in the demo: %v", rooms)
	}
}

// TestBrowserKeyboard: the main flows with the keyboard only: find a
// colleague, call her, transfer the call to another, hang up a call.
func TestBrowserKeyboard(t *testing.T) {
	d := startDemo(t, 4, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	token := restLogin(t, d.URL, "operator", "operator")
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("operator", "operator")
	b.waitFor("4 cards", `document.querySelectorAll('#grid li.card').length === 4`, 10*time.Second)
	wait := 15 * time.Second
	keys := func(k ...string) {
		for _, s := range k {
			b.do(chromedp.KeyEvent(s))
		}
	}
	focused := func() string {
		return eval[string](b, `document.activeElement?.dataset?.exten || document.activeElement?.id || ''`)
	}

	// Find Bob: the search box has the focus after login; his name, then
	// ArrowDown to his card.
	if got := focused(); got != "ext-search" {
		t.Fatalf("after login the focus is on %q, want the search box", got)
	}
	keys("Bob", kb.ArrowDown)
	if got := focused(); got != "202" {
		t.Fatalf("after searching Bob the focus is on %q, want card 202 (search box: %q)", got, eval[string](b, `document.querySelector('#ext-search').value`))
	}
	// Enter calls him from the operator's phone.
	keys(kb.Enter)
	b.waitFor("203 talking with 202", cardIs("203", "busy", "202")+" && "+cardIs("202", "busy", "203"), wait)
	b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected .peer')?.textContent.includes('202')`, wait)
	// Transfer him to Alice: find her and press T on her card.
	keys("/", kb.Escape, "Alice", kb.ArrowDown)
	if got := focused(); got != "201" {
		t.Fatalf("after searching Alice the focus is on %q, want card 201", got)
	}
	keys("t")
	b.waitFor("202 transferred to 201", cardIs("201", "busy", "202")+" && "+cardIs("202", "busy", "201"), wait)
	b.waitFor("203 free", cardIs("203", "online", ""), wait)
	// Hang up Alice's call from her card's menu: M, then the menu's keys.
	keys("m")
	b.waitFor("the menu open and focused", `!document.querySelector('#card-menu').hidden && document.activeElement.closest('#card-menu')`, 5*time.Second)
	for range 8 {
		if eval[string](b, `document.activeElement.dataset.role || ''`) == "hangup" {
			break
		}
		keys(kb.ArrowDown)
	}
	keys(kb.Enter)
	b.waitFor("201 and 202 free", cardIs("201", "online", "")+" && "+cardIs("202", "online", ""), wait)
	if got := focused(); got != "201" {
		t.Errorf("after the menu the focus is on %q, want back on card 201", got)
	}
	x := extOf(t, d.URL, token, "202")
	if len(x.Conversations) != 0 {
		t.Errorf("202 still has %d conversations after the hangup", len(x.Conversations))
	}
	if s := eval[string](b, `document.querySelector('#toast').textContent`); strings.Contains(s, "refused") {
		t.Errorf("toast %q", s)
	}
}
