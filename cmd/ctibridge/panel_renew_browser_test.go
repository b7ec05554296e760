package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ctibridge/ctibridge/auth"
)

// TestBrowserRenewal: with a 3 s token lifetime the panel stays logged in
// across four lifetimes, renewing its session through /auth/refresh and
// handing the new token to its open socket (no reconnect: the live state
// keeps coming), and a change made after the renewals reaches its cards.
// A session revoked on the server then ends the panel at once, and the
// login form says why.
func TestBrowserRenewal(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	hash, err := auth.HashPassword("pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveTwoPBXs(t, "users:\n"+
		"  - {username: ada, name: Ada Lovelace, role: admin, password_hash: \""+hash+"\", endpoints: [\"201\"]}\n",
		"--token-ttl", "3s")
	front := panelFront(t, srv.base)
	b := newBrowser(t, 1280, 800)
	b.do(chromedp.Navigate(front.URL))
	b.login("ada", "pw")
	b.waitFor("live", `document.querySelectorAll('#grid li.card').length >= 2`, 10*time.Second)
	// Count the sockets opened from now on: a renewal must open none.
	eval[int](b, `window.__wsOpens = 0; (() => { const W = window.WebSocket;
		window.WebSocket = class extends W { constructor(...a) { super(...a); window.__wsOpens++; } }; })(), 0`)
	first := eval[string](b, `sessionStorage.getItem('ctibridge.token')`)

	time.Sleep(12 * time.Second) // four lifetimes
	if !eval[bool](b, `document.querySelector('#login-view').hidden`) {
		t.Fatalf("the login form is back after four token lifetimes: %q", eval[string](b, `document.querySelector('#login-error').textContent`))
	}
	if tok := eval[string](b, `sessionStorage.getItem('ctibridge.token')`); tok == first || tok == "" {
		t.Errorf("the token was never renewed")
	}
	if n := eval[int](b, `window.__wsOpens`); n != 0 {
		t.Errorf("the socket was opened again %d times: a renewal must keep it", n)
	}
	// The socket still delivers: DND set over REST shows on 201's card.
	ada := login(t, srv.base, "ada", "pw")
	if code, body := ada.do("POST", "/astproxy/dnd", `{"endpointId":"201","activate":true}`); code != http.StatusOK {
		t.Fatalf("dnd: %d %s", code, body)
	}
	b.waitFor("201's card says DND", `document.querySelector('#grid li[data-exten="201"] .ind-dnd')`, 10*time.Second)

	// Every session of ada revoked on the server: the panel's socket is
	// closed and its login form says the server ended the session.
	if code, body := ada.do("POST", "/auth/sessions/revoke", `{"username":"ada"}`); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	b.waitFor("the login form after the revocation", `!document.querySelector('#login-view').hidden`, 5*time.Second)
	if msg := eval[string](b, `document.querySelector('#login-error').textContent`); msg != "Your session was ended on the server (a logout elsewhere, or an administrator): log in again." {
		t.Errorf("the login form says %q", msg)
	}
}
