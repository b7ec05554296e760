package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// queueMember is what the supervisor test reads of a queue member.
type queueMember struct {
	LoggedIn, Paused bool
	PausedReason     string
}

// TestBrowserSupervisor: the admin (queue_manager) pauses Alice's
// membership of the demo's queue with a reason, unpauses it and logs her
// out, from the queues view; each step is read back over REST. Alice, an
// agent, sees no such buttons on Bob's row. The admin, who has no phone,
// opens the History tab on the switchboard's calls; Alice on her own.
func TestBrowserSupervisor(t *testing.T) {
	d := startDemo(t, 4, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	wait := 10 * time.Second
	admin := restLogin(t, d.URL, "admin", "admin")
	queues := pollREST(t, d.URL, admin, "/astproxy/queues", "the demo's queue", func(qs map[string]any) bool { return len(qs) > 0 })
	var queue string
	for q := range queues {
		queue = q
	}
	if queue == "" {
		t.Fatal("the demo has no queue")
	}
	for _, x := range []string{"201", "202"} {
		postTo(t, d.URL, admin, "/astproxy/queuemember_add", `{"endpointId":"`+x+`","queueId":"`+queue+`"}`)
	}
	member := func(what string, cond func(m queueMember, ok bool) bool) {
		t.Helper()
		pollREST(t, d.URL, admin, "/astproxy/queues", what, func(qs map[string]struct{ Members map[string]queueMember }) bool {
			m, ok := qs[queue].Members["201"]
			return cond(m, ok)
		})
	}
	member("201 a member", func(m queueMember, ok bool) bool { return ok && m.LoggedIn })

	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("admin", "admin")
	b.tab("queues")
	row := `#queues .member[data-member="201"]`
	b.waitFor("Alice's row with Pause", `document.querySelector('`+row+` button[data-role="pause"]')`, wait)
	if got := eval[string](b, `document.querySelector('`+row+` button[data-role="pause"]').getAttribute('aria-label')`); got != "Pause of 201" && got != "Pause of Alice Rossi" {
		t.Errorf("the Pause button is labelled %q: it must name the agent", got)
	}
	b.clearToast()
	b.do(chromedp.SendKeys(chromedp.CSS(row+` input.reason`), "coaching"),
		chromedp.Click(chromedp.CSS(row+` button[data-role="pause"]`)))
	b.refused(t, "/astproxy/queuemember_pause")
	member("201 paused for coaching", func(m queueMember, ok bool) bool { return ok && m.Paused && m.PausedReason == "coaching" })

	b.waitFor("Unpause", `document.querySelector('`+row+` button[data-role="unpause"]')`, wait)
	b.clearToast()
	b.do(chromedp.Click(chromedp.CSS(row + ` button[data-role="unpause"]`)))
	b.refused(t, "/astproxy/queuemember_unpause")
	member("201 unpaused", func(m queueMember, ok bool) bool { return ok && !m.Paused })

	b.waitFor("Log out", `document.querySelector('`+row+` button[data-role="qlogout"]')`, wait)
	b.clearToast()
	b.do(chromedp.Click(chromedp.CSS(row + ` button[data-role="qlogout"]`)))
	b.refused(t, "/astproxy/queuemember_remove")
	member("201 logged out", func(m queueMember, ok bool) bool { return !ok || !m.LoggedIn })

	// An agent steers only herself.
	a := newBrowser(t, 1280, 800)
	a.do(chromedp.Navigate(front.URL))
	a.login("alice", "alice")
	a.tab("queues")
	a.waitFor("Bob's row", `document.querySelector('#queues .member[data-member="202"]')`, wait)
	if eval[bool](a, `!!document.querySelector('#queues .member[data-member="202"] button')`) {
		t.Error("Alice, an agent, is offered buttons on Bob's membership")
	}

	// A call between two others' phones: in the switchboard's history,
	// not in Alice's.
	call := waitCall(t, placeCall(context.Background(), d.Phones["203"], "204"))
	call.hangup(t)
	var sw struct{ Count int }
	deadline := time.Now().Add(wait)
	for sw.Count == 0 && time.Now().Before(deadline) {
		restGet(t, d.URL, admin, "/histcallswitch/interval/"+time.Now().Format("20060102")+"/"+time.Now().Format("20060102"), &sw)
		time.Sleep(50 * time.Millisecond)
	}
	b.tab("history")
	b.waitFor("the admin's history on the switchboard's calls", `!document.querySelector('#hist-scope-wrap').hidden &&
		document.querySelector('#hist-scope').value === 'all' && document.querySelectorAll('#hist-results tbody tr').length > 0`, wait)
	a.tab("history")
	a.waitFor("Alice's own history, no choice", `document.querySelector('#hist-scope-wrap').hidden && document.querySelector('#hist-results table')`, wait)
	if n := eval[int](a, `document.querySelectorAll('#hist-results tbody tr').length`); n != 0 {
		t.Errorf("Alice's history shows %d calls of others", n)
	}
}
