package main

// TestBrowserMore: the conference actions, answering a waiting queue
// caller, the presence chooser, forwarding a colleague's calls and the
// banner that floats over the page, as the operator (phone 203) on the
// demo: asserting the screen, then the state over REST.

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

func TestBrowserMore(t *testing.T) {
	e := startActions(t, "operator")
	b := e.b
	b.run("conference: no actions on a room outside one's scope", func(t *testing.T) { moreConfScope(t, e) })
	b.run("answer a waiting queue caller", func(t *testing.T) { moreQueueAnswer(t, e) })
	b.run("presence chooser", func(t *testing.T) { morePresence(t, e) })
	b.run("forward a colleague's calls", func(t *testing.T) { moreForward(t, e) })
	b.run("the banner does not move the page", func(t *testing.T) { moreBanner(t, e) })
	b.run("group tabs by keyboard", func(t *testing.T) { moreGroupTabs(t, e) })
}

// moreGroupTabs: the group tabs (Everyone, My extensions, the support
// queue) filter the grid; reached with Tab from the search box and moved
// with the arrow keys; the Show selector follows.
func moreGroupTabs(t *testing.T, e *demoEnv) {
	b, wait := e.b, 5*time.Second
	b.waitFor("group tabs", `document.querySelectorAll('#ext-gtabs [role="tab"]').length >= 3`, wait)
	visible := `[...document.querySelectorAll('#grid li.card')].filter(c => !c.hidden && c.offsetParent).length`
	b.do(chromedp.Focus(chromedp.CSS("#ext-search")), chromedp.KeyEvent("\t"))
	b.waitFor("focus on the Everyone tab", `document.activeElement?.dataset.group === 'all'`, wait)
	b.do(chromedp.KeyEvent(kb.ArrowRight))
	b.waitFor("My extensions: only 203", `document.activeElement?.dataset.group === 'mine' && `+visible+` === 1 && document.querySelector('#ext-group').value === 'mine'`, wait)
	b.do(chromedp.KeyEvent(kb.ArrowRight))
	b.waitFor("the queue's members", `document.activeElement?.dataset.group?.startsWith('queue:') && `+visible+` >= 1 && `+visible+` < 8`, wait)
	b.shot("group-tabs")
	b.do(chromedp.KeyEvent(kb.Home))
	b.waitFor("everyone again", `document.activeElement?.dataset.group === 'all' && `+visible+` === 8 && document.activeElement.getAttribute('aria-selected') === 'true'`, wait)
}

// TestBrowserConference: the admin (who may manage room 1000) mutes,
// unmutes, removes a member and locks the room.
func TestBrowserConference(t *testing.T) {
	e := startActions(t, "admin")
	e.b.run("conference: mute, unmute, remove, lock", func(t *testing.T) { moreConference(t, e) })
}

// done waits for the message of an action and fails when it is an error.
func (b *browser) done(t *testing.T, what string) {
	t.Helper()
	if failed, msg := b.outcome(what); failed {
		t.Fatalf("%s failed: %s", what, msg)
	}
}

// moreConfScope: 201 and 204 in room 1000; the operator sees the room but
// is offered no action on it (room 1000 is not in his groups: the server
// would answer 403).
func moreConfScope(t *testing.T, e *demoEnv) {
	b := e.b
	for _, x := range []string{"201", "204"} {
		c := waitCall(t, placeCall(e.ctx, e.d.Phones[x], "800"))
		defer c.call.Hangup(e.ctx) //nolint:errcheck // cleanup
	}
	b.tab("confs")
	sec := `#confs section[data-conf="1000"]`
	b.waitFor("room 1000 with 2 members", `document.querySelectorAll('`+sec+` li.member').length === 2`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('`+sec+` button').length`); n != 0 {
		t.Errorf("the operator is offered %d conference buttons on room 1000", n)
	}
	b.tab("ext")
}

// restConf is a room as GET /astproxy/conferences has it.
type restConf struct {
	ID     string
	Locked bool
	Users  map[string]struct {
		ID, ExtenID string
		Muted       bool
	}
}

// confMember finds the member id of exten in room 1000 (REST).
func confMember(c restConf, exten string) (string, bool) {
	for id, u := range c.Users {
		if u.ExtenID == exten {
			return id, u.Muted
		}
	}
	return "", false
}

// moreConference: 201, 202 and 204 dial 800 (room 1000); the operator
// mutes and unmutes 201, removes 202 and locks the room.
func moreConference(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	var calls []*callResult
	for _, x := range []string{"201", "202", "204"} {
		calls = append(calls, waitCall(t, placeCall(e.ctx, e.d.Phones[x], "800")))
	}
	defer func() {
		for _, c := range calls {
			c.call.Hangup(e.ctx) //nolint:errcheck // a removed member is gone already
		}
	}()
	confs := "/astproxy/conferences"
	in := func(n int) func(map[string]restConf) bool {
		return func(m map[string]restConf) bool { return len(m["1000"].Users) == n }
	}
	room := pollREST(t, e.d.URL, e.token, confs, "3 members in room 1000", in(3))["1000"]
	b.tab("confs")
	sec := `#confs section[data-conf="1000"]`
	b.waitFor("room 1000 with 3 members", `document.querySelectorAll('`+sec+` li.member').length === 3`, wait)
	u201, _ := confMember(room, "201")
	u202, _ := confMember(room, "202")
	row := func(u string) string { return fmt.Sprintf(`%s li.member[data-user="%s"]`, sec, u) }
	click := func(sel string) {
		b.clearToast()
		b.do(chromedp.Click(chromedp.CSS(sel)))
	}

	click(row(u201) + ` button[data-role="mute"]`)
	b.done(t, "mute")
	{
		b.waitFor("201 muted on screen", `document.querySelector('`+row(u201)+`.muted button[data-role="unmute"]')`, wait)
		pollREST(t, e.d.URL, e.token, confs, "201 muted", func(m map[string]restConf) bool { _, mu := confMember(m["1000"], "201"); return mu })
		click(row(u201) + ` button[data-role="unmute"]`)
		b.done(t, "unmute")
		b.waitFor("201 unmuted on screen", `document.querySelector('`+row(u201)+`:not(.muted) button[data-role="mute"]')`, wait)
		pollREST(t, e.d.URL, e.token, confs, "201 unmuted", func(m map[string]restConf) bool { _, mu := confMember(m["1000"], "201"); return !mu })
	}
	b.shot("conference-mute")

	// Remove asks first: Cancel leaves 202 in the room, nothing sent.
	click(row(u202) + ` button[data-role="kick"]`)
	b.waitFor("the confirmation", `document.querySelector('#confirm-dialog').open && document.querySelector('#confirm-text').textContent.startsWith('Remove ')`, wait)
	b.do(chromedp.Click(chromedp.CSS(`#confirm-cancel`)))
	b.waitFor("the confirmation closed", `!document.querySelector('#confirm-dialog').open`, wait)
	time.Sleep(300 * time.Millisecond)
	if id, _ := confMember(pollREST(t, e.d.URL, e.token, confs, "the room", in(3))["1000"], "202"); id == "" {
		t.Fatal("202 removed though the removal was cancelled")
	}
	click(row(u202) + ` button[data-role="kick"]`)
	b.waitFor("the confirmation again", `document.querySelector('#confirm-dialog').open`, wait)
	b.do(chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	b.done(t, "remove")
	{
		b.waitFor("202 gone from the room on screen", `!document.querySelector('`+row(u202)+`') && document.querySelectorAll('`+sec+` li.member').length === 2`, wait)
		pollREST(t, e.d.URL, e.token, confs, "2 members left", in(2))
	}

	click(sec + ` button[data-role="lock"]`)
	b.done(t, "lock")
	{
		b.waitFor("locked on screen", `document.querySelector('`+sec+` button[data-role="lock"]').getAttribute('aria-pressed') === 'true'`, wait)
		pollREST(t, e.d.URL, e.token, confs, "room locked", func(m map[string]restConf) bool { return m["1000"].Locked })
		click(sec + ` button[data-role="lock"]`)
		b.done(t, "unlock")
		pollREST(t, e.d.URL, e.token, confs, "room unlocked", func(m map[string]restConf) bool { return !m["1000"].Locked })
	}
	b.shot("conference-actions")
	b.tab("ext")

	// Asterisk's refusals reach the screen as sentences in the user's
	// language, never as Asterisk's English (what the bridge relays of
	// ConfbridgeKick, ConfbridgeEnd, Originate and one it does not know).
	plain := func(said string) string {
		return eval[string](b, `import(new URL('errors.js', document.querySelector('link[rel="modulepreload"]').href)).then(m => m.plainError({status: 502, code: 'pbx_error', serverMessage: `+"`"+said+"`"+`}))`)
	}
	for said, want := range map[string]string{
		"the PBX refused ConfbridgeKick: No Channel by that name found in Conference.": "The PBX refused: that person is no longer in the conference",
		"the PBX refused ConfbridgeKick: No Conference by that name found.":            "The PBX refused: the conference has already ended",
		"the PBX refused Originate: Originate failed":                                  "The PBX refused: the call could not be placed",
		"the PBX refused Setvar: Failed to set variable":                               "The PBX refused the request",
	} {
		if got := plain(said); got != want {
			t.Errorf("%q shows %q, want %q", said, got, want)
		}
	}
}

// restQueue is a queue as GET /astproxy/queues has it.
type restQueue struct {
	Members        map[string]struct{ Paused bool }
	WaitingCallers map[string]struct{ Num string }
}

// moreQueueAnswer: every member of support paused, 205 calls 600 and
// waits; the operator answers it from the queues view on his phone.
func moreQueueAnswer(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	qs := map[string]restQueue{}
	restGet(t, e.d.URL, e.token, "/astproxy/queues", &qs)
	admin := restLogin(t, e.d.URL, "admin", "admin")
	pauseAll := func(path string) {
		for name, q := range qs {
			for m := range q.Members {
				postTo(t, e.d.URL, admin, "/astproxy/"+path, fmt.Sprintf(`{"endpointId":%q,"queueId":%q}`, m, name))
			}
		}
	}
	pauseAll("queuemember_pause")
	defer pauseAll("queuemember_unpause")
	pending := placeCall(e.ctx, e.d.Phones["205"], "600")
	pollREST(t, e.d.URL, e.token, "/astproxy/queues", "205 waiting", func(m map[string]restQueue) bool {
		for _, q := range m {
			for _, w := range q.WaitingCallers {
				if w.Num == "205" {
					return true
				}
			}
		}
		return false
	})
	b.tab("queues")
	btn := `#queues li.waiting button[data-role="qanswer"]`
	b.waitFor("the waiting caller with Answer", `document.querySelector('`+btn+`')`, wait)
	b.shot("queue-waiting")
	b.clearToast()
	b.do(chromedp.Click(chromedp.CSS(btn)))
	if !b.refused(t, "/astproxy/pickup_qwaitcaller") {
		b.waitFor("nobody waiting on screen", `!document.querySelector('#queues li.waiting')`, wait)
		e.waitExt(t, "203", "203 talking to 205", func(r restExt) bool {
			for _, c := range r.Conversations {
				if c.CounterpartNum == "205" {
					return true
				}
			}
			return false
		})
	}
	b.tab("ext")
	waitCall(t, pending)
	e.idle(t, "203", "205")
}

// morePresence: the operator chooses "do not disturb", then "voicemail",
// then "online" in the top bar; the badges and GET user/presence follow.
func morePresence(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	b.waitFor("the presence chooser", `!document.querySelector('#me-pres-wrap').hidden && document.querySelector('#me-pres').value === 'online'`, wait)
	// The choice and its change event in one step, as a user's pick is:
	// a live update in between would redraw the chooser.
	choose := func(status string) {
		b.clearToast()
		eval[bool](b, `(() => { const s = document.querySelector('#me-pres'); s.value = '`+status+`'; s.dispatchEvent(new Event('change')); return true })()`)
	}
	type presence struct{ Status string }
	card := `#grid li[data-exten="203"]`
	choose("dnd")
	if !b.refused(t, "/user/presence") {
		pollREST(t, e.d.URL, e.token, "/user/presence", "presence dnd", func(p presence) bool { return p.Status == "dnd" })
		b.waitFor("203's card says DND", `document.querySelector('`+card+` .ind-dnd')`, wait)
		b.waitFor("the chooser says DND", `document.querySelector('#me-pres').value === 'dnd'`, wait)
	}
	choose("voicemail")
	if !b.refused(t, "/user/presence") {
		pollREST(t, e.d.URL, e.token, "/user/presence", "presence voicemail", func(p presence) bool { return p.Status == "voicemail" })
		b.waitFor("203's card forwards to voicemail", `!document.querySelector('`+card+` .ind-dnd') && document.querySelector('`+card+` .ind-cf')`, wait)
		b.waitFor("the chooser says voicemail", `document.querySelector('#me-pres').value === 'voicemail'`, wait)
		b.shot("presence-voicemail")
	}
	choose("online")
	b.refused(t, "/user/presence")
	pollREST(t, e.d.URL, e.token, "/user/presence", "presence online", func(p presence) bool { return p.Status == "online" })
	b.waitFor("203's card without badges", `!document.querySelector('`+card+` .ind-dnd, `+card+` .ind-cf')`, wait)
}

// moreForward: the operator forwards 202's calls to 0721405516 from its
// card's menu, then stops it.
func moreForward(t *testing.T, e *demoEnv) {
	b, wait := e.b, 10*time.Second
	b.menuAction("202", "cfon")
	b.waitFor("the number field", `document.activeElement?.id === 'card-menu-cf'`, wait)
	b.do(chromedp.SendKeys(chromedp.CSS("#card-menu-cf"), "0721405516\r"))
	if !b.refused(t, "/astproxy/cfcall") {
		e.waitExt(t, "202", "202 forwarded", func(r restExt) bool { return r.CF == "0721405516" })
		b.waitFor("202's card shows the forward", `document.querySelector('#grid li[data-exten="202"] .ind-cf')?.textContent.includes('0721405516')`, wait)
		b.shot("forward-colleague")
		b.menuAction("202", "cfoff")
		b.refused(t, "/astproxy/cfcall")
		e.waitExt(t, "202", "202 not forwarded", func(r restExt) bool { return r.CF == "" })
		b.waitFor("202's card without forward", `!document.querySelector('#grid li[data-exten="202"] .ind-cf')`, wait)
	}
}

// moreBanner: a banner shown does not move the top bar or the tabs, and a
// click on a tab under it still reaches the tab.
func moreBanner(t *testing.T, e *demoEnv) {
	b := e.b
	before := eval[float64](b, `document.querySelector('#tab-queues').getBoundingClientRect().top`)
	eval[bool](b, `(() => { const x = document.querySelector('#banner'); x.textContent = 'test'; x.className = 'banner error'; x.hidden = false; return true })()`)
	after := eval[float64](b, `document.querySelector('#tab-queues').getBoundingClientRect().top`)
	if before != after {
		t.Errorf("the banner moved the tabs from y=%v to y=%v", before, after)
	}
	b.do(chromedp.Click(chromedp.CSS("#tab-queues")))
	b.waitFor("the queues view open with the banner up", `!document.querySelector('#view-queues').hidden`, 2*time.Second)
	eval[bool](b, `(() => { document.querySelector('#banner').hidden = true; return true })()`)
	b.tab("ext")
}
