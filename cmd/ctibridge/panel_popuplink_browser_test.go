package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPopupLink: with --popup-link set, the incoming call pop-up
// links to the customer card, the caller's number and name URL-escaped
// into the template, opening in a new tab without a referrer; /user/me
// hands the template over. The page refuses a template that is not http
// or https (the server refuses it first, at start-up).
func TestBrowserPopupLink(t *testing.T) {
	const tmpl = "https://crm.example.test/card?phone={number}&who={name}"
	d := startDemoWith(t, 4, 3*time.Second, func(c *demoConfig) { c.popupLink = tmpl })
	front := panelFront(t, d.URL)
	wait := 10 * time.Second
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("operator", "operator")
	eval[bool](b, recorderJS)
	// The snapshot first: a ring before it is not told again.
	b.waitFor("4 cards", `document.querySelectorAll('#grid li.card').length === 4`, wait)

	pending := placeCall(context.Background(), d.Phones["201"], "203")
	b.waitFor("the pop-up for 201", `!document.querySelector('#popup').hidden && document.querySelector('#popup-caller').textContent.includes('201')`, wait)
	b.waitFor("the customer card link", `!document.querySelector('#popup-card').hidden`, wait)
	href := eval[string](b, `document.querySelector('#popup-card').href`)
	name := eval[string](b, `(() => { const c = document.querySelector('#popup-caller').textContent; const m = c.match(/^(.*) \(201\)$/); return m ? m[1] : '' })()`)
	want := "https://crm.example.test/card?phone=201&who=" + strings.ReplaceAll(name, " ", "%20")
	if href != want {
		t.Errorf("customer card link %q, want %q", href, want)
	}
	if got := eval[string](b, `document.querySelector('#popup-card').target + ' ' + document.querySelector('#popup-card').rel`); got != "_blank noopener noreferrer" {
		t.Errorf("the link opens with %q", got)
	}
	b.shot("popup-card")
	call := waitCall(t, pending)
	b.waitFor("the pop-up gone once answered", `document.querySelector('#popup').hidden`, wait)
	call.hangup(t)

	// The template over REST, and the page's own check of the scheme.
	var me struct{ PopupLink string }
	restGet(t, d.URL, restLogin(t, d.URL, "operator", "operator"), "/user/me", &me)
	if me.PopupLink != tmpl {
		t.Errorf("/user/me popupLink %q, want %q", me.PopupLink, tmpl)
	}
	got := eval[string](b, `(async () => {
		const m = await import(document.querySelector('script[type="module"]').src.replace(/app\.js$/, 'popup.js'));
		return [m.cardLink('javascript:alert({number})', '201', ''), m.cardLink('data:text/html,{number}', '201', ''),
			m.cardLink('https://x.test/{number}?n={name}', '+39 0721/1', 'Rossi & Co')].join('|');
	})()`)
	if got != "||https://x.test/%2B39%200721%2F1?n=Rossi%20%26%20Co" {
		t.Errorf("cardLink: %q", got)
	}
}
