package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// postsJS records the URL of every request the page sends from now on.
const postsJS = `(() => {
	if (window.__posts) return true;
	window.__posts = [];
	const f = window.fetch;
	window.fetch = (u, o) => { window.__posts.push(String(u)); return f(u, o); };
	return true;
})()`

// TestBrowserSafeTransfers, as the operator (203) on the demo: a blind
// transfer to a colleague in do not disturb, to one whose phone is
// offline, and to an extension that does not exist is refused in plain
// words before anything is sent (the call stays, over REST); a call is
// sent to a colleague's voicemail (the message lands in the mailbox) and
// to another's mobile (the caller stays in a call, the operator is free);
// a pickup that comes too late says it failed.
func TestBrowserSafeTransfers(t *testing.T) {
	e := startActions(t, "operator")
	b, wait := e.b, 10*time.Second
	admin := restLogin(t, e.d.URL, "admin", "admin")
	eval[bool](b, postsJS)
	sent := func(action string) bool {
		return eval[bool](b, `window.__posts.some(u => u.endsWith('/astproxy/`+action+`'))`)
	}

	b.run("refused before it is sent", func(t *testing.T) {
		postTo(t, e.d.URL, admin, "/astproxy/dnd", `{"endpointId":"205","activate":true}`)
		b.waitFor("205 in DND", `(`+cardJS("205")+`).status === 'dnd'`, wait)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := e.d.Phones["206"].Register(ctx, 0)
		cancel()
		if err != nil {
			t.Fatalf("206 unregister: %v", err)
		}
		b.waitFor("206 offline", `(`+cardJS("206")+`).status === 'offline'`, wait)
		call := e.connect(t, "201", "203")
		for to, want := range map[string]string{"205": "does not want to be disturbed", "206": "is offline", "299": "There is no extension 299"} {
			b.clearToast()
			eval[bool](b, `(document.querySelector('#mycalls .call-row input.xfer-to').value = '', true)`)
			b.do(chromedp.SendKeys(chromedp.CSS(`#mycalls .call-row input.xfer-to`), to),
				chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="blind"]`)))
			failed, msg := b.outcome("blind transfer to " + to)
			if !failed || !strings.Contains(msg, want) || !strings.Contains(msg, "not transferred") && to != "299" {
				t.Errorf("blind transfer to %s: %q (error %v), want the words %q", to, msg, failed, want)
			}
		}
		// From a card's menu too.
		b.menuAction("205", "xferhere")
		if failed, msg := b.outcome("transfer onto 205's card"); !failed || !strings.Contains(msg, "does not want to be disturbed") {
			t.Errorf("transfer onto 205's card: %q", msg)
		}
		if sent("blindtransfer") {
			t.Error("a blind transfer was sent to an unavailable target")
		}
		if !extOf(t, e.d.URL, admin, "203").connectedTo("201") {
			t.Error("203's call with 201 did not survive the refusals")
		}
		call.hangup(t)
		e.idle(t, "201", "203")
		postTo(t, e.d.URL, admin, "/astproxy/dnd", `{"endpointId":"205","activate":false}`)
	})

	b.run("to a colleague's voicemail", func(t *testing.T) {
		call := e.connect(t, "201", "203")
		b.menuAction("202", "xfervm")
		if failed, msg := b.outcome("transfer to 202's voicemail"); failed {
			t.Fatalf("transfer to 202's voicemail: %s", msg)
		}
		e.waitExt(t, "203", "203 free", func(r restExt) bool { return len(r.Conversations) == 0 })
		b.waitFor("203 available", cardIs("203", "online", ""), wait)
		if x := extOf(t, e.d.URL, admin, "202"); len(x.Conversations) != 0 {
			t.Errorf("202 was rung: %+v", x.Conversations)
		}
		call.hangup(t) // the message left
		pollREST(t, e.d.URL, admin, "/astproxy/extension/202", "a new message for 202", func(x struct{ Voicemail struct{ New int } }) bool {
			return x.Voicemail.New == 1
		})
		b.waitFor("202's card says so", `document.querySelector('#grid li[data-exten="202"] .ind-vm')`, wait)
		e.idle(t, "201")
	})

	b.run("to a colleague's mobile", func(t *testing.T) {
		call := e.connect(t, "204", "203")
		b.menuAction("202", "xfermobile")
		if failed, msg := b.outcome("transfer to 202's mobile"); failed {
			t.Fatalf("transfer to 202's mobile: %s", msg)
		}
		e.waitExt(t, "203", "203 free", func(r restExt) bool { return len(r.Conversations) == 0 })
		time.Sleep(500 * time.Millisecond)
		x := extOf(t, e.d.URL, admin, "204")
		if len(x.Conversations) == 0 {
			t.Fatal("the caller was dropped, not sent to the mobile")
		}
		for _, c := range x.Conversations {
			t.Logf("204 after the transfer to the mobile: %+v", c)
		}
		select {
		case <-call.call.Done():
			t.Error("the caller's phone hung up")
		default:
		}
		call.hangup(t)
		e.idle(t, "204")
	})

	b.run("a pickup too late says so", func(t *testing.T) {
		pending := placeCall(e.ctx, e.d.Phones["202"], "201")
		b.waitFor("201 ringing", `(`+cardJS("201")+`).status === 'ringing'`, wait)
		b.menuAction("201", "pickup")
		// 201 answers before the operator's phone does (both ring 1.5 s):
		// nothing is left to pick up.
		b.waitFor("the failure said", `!document.querySelector('#toast').hidden && document.querySelector('#toast').classList.contains('error')`, 15*time.Second)
		msg := eval[string](b, `document.querySelector('#toast').textContent`)
		if !strings.Contains(msg, "failed") && !strings.Contains(msg, "no longer ringing") {
			t.Errorf("after a failed pickup the screen says %q", msg)
		}
		if strings.Contains(msg, "no longer ringing") {
			b.allow("/astproxy/pickup_conv")
		}
		t.Logf("failed pickup: %q", msg)
		call := waitCall(t, pending)
		if !extOf(t, e.d.URL, admin, "201").connectedTo("202") {
			t.Error("201 is not talking with 202")
		}
		e.waitExt(t, "203", "203 free", func(r restExt) bool { return len(r.Conversations) == 0 })
		call.hangup(t)
		e.idle(t, "201", "202", "203")
	})
	b.shot("safe-transfers")
}
