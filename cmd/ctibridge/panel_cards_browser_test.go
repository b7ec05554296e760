package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserSecondCall: a colleague's second call is on the card, as the
// admin sees it: 202 talks with 201, then 204 calls 201 too (the phone
// takes it, as a call waiting answered): 201's card says two calls and
// names the one it does not show, compact cards say "+1"; over REST 201
// has both. When
// one ends, the card says one call again.
func TestBrowserSecondCall(t *testing.T) {
	d := startDemo(t, 4, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	wait := 10 * time.Second
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("admin", "admin")
	b.waitFor("4 cards", `document.querySelectorAll('#grid li.card').length === 4`, wait)
	admin := restLogin(t, d.URL, "admin", "admin")
	ctx := context.Background()

	first := waitCall(t, placeCall(ctx, d.Phones["202"], "201"))
	b.waitFor("201 talking with 202", cardIs("201", "busy", "202"), wait)
	if !eval[bool](b, `document.querySelector('#grid li[data-exten="201"] .card-more').hidden`) {
		t.Error("one call, and the card says more")
	}
	second := waitCall(t, placeCall(ctx, d.Phones["204"], "201"))
	more := `document.querySelector('#grid li[data-exten="201"] .card-more')`
	// The card shows the newest answered call (a ringing one only when
	// none is answered), the line under it the other: which one depends on
	// whether 204's call is answered yet when the page draws it.
	peer := `document.querySelector('#grid li[data-exten="201"] .peer').textContent`
	b.waitFor("201's card with its second call", `!`+more+`.hidden && `+more+`.textContent.startsWith('2 calls') && (`+
		more+`.textContent.includes('204') && `+peer+`.includes('202') || `+more+`.textContent.includes('202') && `+peer+`.includes('204'))`, wait)
	if got := eval[string](b, `document.querySelector('#grid li[data-exten="201"]').getAttribute('aria-label')`); !strings.Contains(got, "2 calls") {
		t.Errorf("201's card is read as %q: no second call", got)
	}
	x := extOf(t, d.URL, admin, "201")
	if len(x.Conversations) != 2 {
		t.Errorf("201 over REST: %d conversations, want 2", len(x.Conversations))
	}
	eval[bool](b, `document.documentElement.classList.add('compact'), true`)
	after := `getComputedStyle(document.querySelector('#grid li[data-exten="201"] .card-call'), '::after').content`
	b.waitFor("the compact card's +1", after+` === '"+1"'`, wait)
	b.shot("second-call")
	eval[bool](b, `document.documentElement.classList.remove('compact'), true`)

	second.hangup(t)
	b.waitFor("one call again", more+`.hidden && `+cardIs("201", "busy", "202"), wait)
	if x := extOf(t, d.URL, admin, "201"); len(x.Conversations) != 1 {
		t.Errorf("201 over REST after 204 hung up: %d conversations", len(x.Conversations))
	}
	first.hangup(t)
	b.waitFor("201 available", cardIs("201", "online", ""), wait)
}

// TestBrowserWallboard: the wallboard, opened from its tab, shows each
// queue in type readable across a room: as the demo's queue's members
// are paused and a caller waits, the tile says 1 waiting with the longest
// wait ticking and the agents paused; unpausing one, the caller is
// answered: 0 waiting, 1 agent in a call. Each figure is checked against
// GET /astproxy/queues.
func TestBrowserWallboard(t *testing.T) {
	d := startDemo(t, 6, 700*time.Millisecond)
	front := panelFront(t, d.URL)
	wait := 10 * time.Second
	admin := restLogin(t, d.URL, "admin", "admin")
	qs := pollREST(t, d.URL, admin, "/astproxy/queues", "the demo's queue and its members", func(m map[string]restQueue) bool {
		for _, q := range m {
			return len(q.Members) > 0
		}
		return false
	})
	var queue string
	var members []string
	for name, q := range qs {
		queue = name
		for m := range q.Members {
			members = append(members, m)
		}
	}
	if queue == "" || len(members) == 0 {
		t.Fatalf("the demo's queues: %+v", qs)
	}
	for _, m := range members {
		postTo(t, d.URL, admin, "/astproxy/queuemember_pause", `{"endpointId":"`+m+`","queueId":"`+queue+`"}`)
	}

	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("operator", "operator")
	b.tab("wall") // reachable from the panel: a tab of its own
	tile := `document.querySelector('#wallboard .wb-queue[data-queue="` + queue + `"]')`
	fig := func(role string) string {
		return tile + `?.querySelector('[data-role="` + role + `"] .wb-num')?.textContent`
	}
	b.waitFor("the queue's tile, every agent paused", fig("paused")+` === '`+itoa(len(members))+`' && `+fig("waiting")+` === '0'`, wait)

	pending := placeCall(context.Background(), d.Phones["205"], "600")
	b.waitFor("1 waiting, the longest wait ticking", fig("waiting")+` === '1' && /^0:0[1-9]$/.test(`+fig("longest")+`)`, wait)
	q := pollREST(t, d.URL, admin, "/astproxy/queues", "205 waiting", func(m map[string]restQueue) bool { return len(m[queue].WaitingCallers) == 1 })
	paused := 0
	for _, m := range q[queue].Members {
		if m.Paused {
			paused++
		}
	}
	if got := eval[string](b, fig("paused")); got != itoa(paused) {
		t.Errorf("the wallboard says %s paused, REST %d", got, paused)
	}
	if px := eval[float64](b, `parseFloat(getComputedStyle(document.querySelector('#wallboard .wb-num')).fontSize)`); px < 48 {
		t.Errorf("the wallboard's figures are %.0f px: not readable across a room", px)
	}
	b.shot("wallboard")

	postTo(t, d.URL, admin, "/astproxy/queuemember_unpause", `{"endpointId":"`+members[0]+`","queueId":"`+queue+`"}`)
	b.waitFor("the caller answered: 0 waiting, 1 in a call", fig("waiting")+` === '0' && `+fig("busy")+` === '1' && `+fig("longest")+` === '–'`, 15*time.Second)
	pollREST(t, d.URL, admin, "/astproxy/queues", "nobody waiting", func(m map[string]restQueue) bool { return len(m[queue].WaitingCallers) == 0 })
	call := waitCall(t, pending)
	call.hangup(t)
	for _, m := range members {
		postTo(t, d.URL, admin, "/astproxy/queuemember_unpause", `{"endpointId":"`+m+`","queueId":"`+queue+`"}`)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
