package main

// TestBrowserScale and its fake bridge: first paint and event-to-screen
// latency with many extensions, the compact layout's density, the tablet
// layout (docs/panel.md, "Measured").

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/panel"
)

// behaviour (the demo test covers that).
type fakeBridge struct {
	n      int
	events chan fakeEvent
	// sent receives each event with the time just before its WebSocket write.
	sent chan sentEvent
	// raw takes events of any type, as {type, data}: sent as they are.
	raw chan fakeRaw
	// reject, when not "", is a delta name the fake does not know: a
	// subscribe asking for it is closed with 4004, as a server from
	// before it closes; subs, when not nil, gets each subscribe's deltas.
	reject string
	subs   chan []string
	// ringIn, when true, has 1000 rung by 1250 in every snapshot.
	ringIn bool
}

type fakeRaw struct {
	typ  string
	data any
}

type sentEvent struct {
	fakeEvent
	at time.Time
}

type fakeEvent struct {
	exten, status string
}

func fakeExt(i int, status string) map[string]any {
	exten := fmt.Sprint(1000 + i)
	x := map[string]any{"exten": exten, "name": fmt.Sprintf("Person %03d", i), "status": status, "dnd": false,
		"cf": "", "cfb": "", "cfu": "", "ip": "127.0.0.1", "port": "5060", "sipuseragent": "sim", "chanType": "pjsip",
		"context": "from-internal", "conversations": map[string]any{}}
	// Some carry what a FreePBX-style PBX adds: DND, a forward, voicemail.
	switch i % 10 {
	case 7:
		x["dnd"] = true
	case 3:
		x["cf"] = "0721405516"
	case 5:
		x["voicemail"] = map[string]int{"new": 2, "old": 1}
	}
	if status == "busy" || status == "ringing" {
		peer := fmt.Sprint(1000 + (i+250)%500)
		id := "PJSIP/" + exten + "-1>PJSIP/" + peer + "-2"
		now := time.Now().UnixMilli()
		x["conversations"] = map[string]any{id: map[string]any{"id": id, "callId": "1." + exten, "owner": exten,
			"connected": status == "busy", "direction": "out", "counterpartNum": peer, "counterpartName": "Peer " + peer,
			"startTime": now - 60000, "answeredAt": map[bool]int64{true: now - 55000, false: 0}[status == "busy"],
			"duration": 55, "recording": "false"}}
	}
	return x
}

func (f *fakeBridge) handler() http.Handler {
	me := map[string]any{"username": "op", "name": "Operator", "role": "operator", "endpoints": []string{"1000"},
		"groups": []string{"all"}, "permissions": []string{}, "scope": nil, "seesAllCalls": true,
		"actions": []string{"call", "hangup", "transfer", "park", "pickup_parking", "record"}}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	p := panel.Handler()
	mux.Handle("GET /{$}", p)
	mux.Handle("GET "+panel.Prefix, p)
	mux.HandleFunc("POST /auth/login", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"token": "tok", "expiresAt": time.Now().Add(time.Hour).UnixMilli(), "user": me})
	})
	mux.HandleFunc("GET /user/me", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, me) })
	mux.HandleFunc("GET /astproxy/conferences", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, map[string]any{}) })
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "openapi: 3.0.3\npaths:\n  /astproxy/conferences:\n    get: {}\n")
	})
	up := websocket.Upgrader{}
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		var m struct {
			Op, Token string
			Deltas    []string
		}
		if c.ReadJSON(&m) != nil || m.Op != "auth" || m.Token != "tok" {
			return
		}
		c.WriteJSON(map[string]any{"op": "hello", "version": 1, "epoch": "fake"})
		if c.ReadJSON(&m) != nil || m.Op != "subscribe" {
			return
		}
		if f.subs != nil {
			f.subs <- m.Deltas
		}
		if f.reject != "" && slices.Contains(m.Deltas, f.reject) {
			reason := `deltas: "` + f.reject + `" has none (known: trunks, status)`
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, reason))
			return
		}
		exts := map[string]any{}
		// Half of them in a call (busy or ringing), as in the targets.
		statuses := []string{"busy", "online", "ringing", "offline", "busy", "online", "busy", "dnd", "ringing", "online"}
		for i := range f.n {
			exts[fmt.Sprint(1000+i)] = fakeExt(i, statuses[i%len(statuses)])
		}
		if f.ringIn {
			x := fakeExt(0, "ringing")
			for _, c := range x["conversations"].(map[string]any) {
				c.(map[string]any)["direction"] = "in"
			}
			exts["1000"] = x
		}
		c.WriteJSON(map[string]any{"op": "snapshot", "seq": 1, "version": 1, "epoch": "fake", "stale": false,
			"pbx":        map[string]any{"pbx": "live", "version": 1, "since": time.Now().UnixMilli()},
			"extensions": exts, "queues": map[string]any{}, "parkings": map[string]any{}, "trunks": map[string]any{}})
		pings := make(chan struct{}, 4)
		go func() {
			for {
				if c.ReadJSON(&m) != nil {
					close(pings)
					return
				}
				if m.Op == "ping" {
					pings <- struct{}{}
				}
			}
		}()
		seq := uint64(1)
		for {
			select {
			case _, ok := <-pings:
				if !ok {
					return
				}
				c.WriteJSON(map[string]string{"op": "pong"})
			case e := <-f.events:
				seq++
				var i int
				fmt.Sscan(e.exten, &i)
				b, _ := json.Marshal(map[string]any{"op": "event", "seq": seq, "type": "extenUpdate", "at": time.Now().UnixMilli(), "data": fakeExt(i-1000, e.status)})
				at := time.Now()
				if c.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
				f.sent <- sentEvent{e, at}
			case r := <-f.raw:
				seq++
				if c.WriteJSON(map[string]any{"op": "event", "seq": seq, "type": r.typ, "at": time.Now().UnixMilli(), "data": r.data}) != nil {
					return
				}
			}
		}
	})
	return mux
}

// startFake serves a fake bridge of n extensions and logs a browser in.
func startFake(t *testing.T, n, width, height int) (*fakeBridge, *browser) {
	t.Helper()
	return startFakeBridge(t, newFakeBridge(n), width, height)
}

func newFakeBridge(n int) *fakeBridge {
	return &fakeBridge{n: n, events: make(chan fakeEvent), sent: make(chan sentEvent, 1024), raw: make(chan fakeRaw)}
}

// startFakeBridge serves fb and logs a browser in.
func startFakeBridge(t *testing.T, fb *fakeBridge, width, height int) (*fakeBridge, *browser) {
	t.Helper()
	n := fb.n
	front := startFront(t, fb.handler())
	b := newBrowser(t, width, height)
	b.do(chromedp.Navigate(front.URL))
	b.login("op", "op")
	b.waitFor(fmt.Sprint(n, " cards"), fmt.Sprintf(`document.querySelectorAll('#grid li.card').length === %d`, n), 20*time.Second)
	return fb, b
}

// TestBrowserScale measures, with 1,000 extensions of which 500 are in a
// call, the first paint of the grid after a (re)load and the time from an
// event leaving the server to its change being on screen while 50 changes
// a second arrive; docs/panel.md has the numbers.
func TestBrowserScale(t *testing.T) {
	const n = 1000
	fb, b := startFake(t, n, 1280, 800)
	b.shot("grid-1000")

	// First paint: reload with the token in sessionStorage; the panel marks
	// "ctib:grid" two frames after it rendered the snapshot.
	var paints []float64
	for range 3 {
		b.do(chromedp.Reload())
		b.waitFor("grid mark", `performance.getEntriesByName('ctib:grid').length > 0`, 20*time.Second)
		paints = append(paints, eval[float64](b, `performance.getEntriesByName('ctib:grid')[0].startTime`))
	}
	if got := eval[int](b, `document.querySelectorAll('#grid li.card').length`); got != n {
		t.Fatalf("%d cards after reload, want %d", got, n)
	}
	_, _, worst := stats(paints)
	best := slices.Min(paints)
	t.Logf("first paint of the %d-extension grid (500 in calls) after load: %.0f ms (best %.0f, worst %.0f ms)", n, paints, best, worst)
	// The best of three is what the panel can do; the others add whatever
	// else the machine was doing (in CI: other test packages, -race). The
	// figure is logged and kept in docs/panel.md; the bound only catches a
	// grid that has become unusable.
	if best > firstPaintMax {
		t.Errorf("first paint %.0f ms at best, want < %d ms", best, firstPaintMax)
	}

	// Latency at 50 changes a second: each event's send time against the
	// frame drawn after its card changed.
	eval[bool](b, recorderJS)
	const events = 150
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := range events {
			<-tick.C
			// A different extension each time, going on hold: no card
			// starts on hold, so each event changes what is on screen.
			fb.events <- fakeEvent{fmt.Sprint(1000 + (i*37+1)%n), "onhold"}
		}
	}()
	var sent []sentEvent
	for range events {
		select {
		case e := <-fb.sent:
			sent = append(sent, e)
		case <-time.After(20 * time.Second):
			t.Fatal("the fake bridge stopped sending")
		}
	}
	last := sent[len(sent)-1]
	b.waitFor("the last change on screen", fmt.Sprintf(`window.__rec.cards.some(c => c.exten === %q && c.status === %q)`, last.exten, last.status), 10*time.Second)
	marks := eval[[]cardMark](b, `window.__rec.cards`)
	var lat []float64
	for _, e := range sent {
		at := float64(e.at.UnixMicro()) / 1000
		for _, m := range marks {
			if m.Exten == e.exten && m.Status == e.status && m.T >= at {
				lat = append(lat, m.T-at)
				break
			}
		}
	}
	if len(lat) < events*9/10 {
		t.Fatalf("only %d of %d changes seen on screen", len(lat), events)
	}
	p50, p95, max := stats(lat)
	t.Logf("event-to-screen latency with %d extensions at 50 changes/s over %d events: p50 %.1f ms, p95 %.1f ms, max %.1f ms", n, len(lat), p50, p95, max)
	if p95 > screenLagStream {
		t.Errorf("event-to-screen p95 %.1f ms, want < %d ms", p95, screenLagStream)
	}

	// Keyboard: the first card is in the tab order and arrows move along.
	b.do(chromedp.Focus(chromedp.CSS(`#grid li[tabindex="0"]`)), chromedp.KeyEvent(kb.ArrowRight))
	if got := eval[string](b, `document.activeElement.dataset.exten`); got != "1001" {
		t.Errorf("ArrowRight from the first card focused %q, want 1001", got)
	}
	// The filter narrows the grid.
	b.do(chromedp.SendKeys(chromedp.CSS("#ext-search"), "Person 12"))
	b.waitFor("filtered grid", `[...document.querySelectorAll('#grid li.card')].filter(li => !li.hidden).length === 10`, 5*time.Second)
}

// visibleCardsJS counts the cards wholly inside the viewport.
const visibleCardsJS = `[...document.querySelectorAll('#grid li.card')].filter(li => {
	if (li.hidden) return false;
	const r = li.getBoundingClientRect();
	return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
}).length`

// TestBrowserLayout: compact mode fits at least 120 of 200 extensions on
// 1280x800, the normal mode still works at 1280x720 and on a tablet
// (768x1024) without sideways scrolling, and the theme follows the system
// (prefers-color-scheme) until the user picks one.
func TestBrowserLayout(t *testing.T) {
	const n = 200
	_, b := startFake(t, n, 1280, 800)
	if !eval[bool](b, `document.documentElement.classList.contains('compact')`) {
		t.Error("200 extensions did not open in compact mode")
	}
	got := eval[int](b, visibleCardsJS)
	t.Logf("compact mode: %d of %d cards wholly visible at 1280x800", got, n)
	if got < 120 {
		t.Errorf("compact mode shows %d cards at 1280x800, want at least 120", got)
	}
	b.shot("compact-200-1280x800")
	// Badges as the extension JSON carries them (fakeExt): DND, forward
	// target, voicemail count; absent where the JSON has none.
	badge := func(exten, sel string) string {
		return eval[string](b, fmt.Sprintf(`document.querySelector('#grid li[data-exten="%s"] %s')?.textContent || ''`, exten, sel))
	}
	if got := badge("1007", ".ind-dnd"); got != "DND" {
		t.Errorf("1007's DND badge %q", got)
	}
	if got := badge("1003", ".ind-cf"); !strings.Contains(got, "0721405516") {
		t.Errorf("1003's forward badge %q", got)
	}
	if got := badge("1005", ".ind-vm"); !strings.Contains(got, "2") {
		t.Errorf("1005's voicemail badge %q", got)
	}
	if got := badge("1001", ".ind"); got != "" {
		t.Errorf("1001 has a badge %q, but its JSON has nothing to show", got)
	}
	// The switch turns it off, and the choice is kept.
	b.do(chromedp.Click(chromedp.CSS("#pref-compact")))
	b.waitFor("normal cards", `!document.documentElement.classList.contains('compact')`, 5*time.Second)
	normal := eval[int](b, visibleCardsJS)
	t.Logf("normal mode: %d cards wholly visible at 1280x800", normal)
	if localStorage := eval[string](b, `localStorage.getItem('ctibridge.compact')`); localStorage != "0" {
		t.Errorf("compact choice stored as %q, want 0", localStorage)
	}
	for _, size := range [][2]int64{{1280, 720}, {768, 1024}} {
		b.do(chromedp.EmulateViewport(size[0], size[1]))
		time.Sleep(100 * time.Millisecond)
		if w := eval[int](b, `document.documentElement.scrollWidth`); int64(w) > size[0] {
			t.Errorf("at %dx%d the page is %d px wide: it scrolls sideways", size[0], size[1], w)
		}
		b.shot(fmt.Sprintf("grid-200-%dx%d", size[0], size[1]))
	}

	// Themes: the system's dark scheme, then the user's light choice.
	bg := `getComputedStyle(document.body).backgroundColor`
	dark := `(() => { const m = ` + bg + `.match(/\d+/g).map(Number); return m[0] + m[1] + m[2] < 150 })()`
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	b.waitFor("dark theme from the system", dark, 5*time.Second)
	b.shot("theme-dark-768x1024")
	b.do(chromedp.SetValue(chromedp.CSS("#pref-theme"), "light"))
	eval[bool](b, `(document.querySelector('#pref-theme').dispatchEvent(new Event('change')), true)`)
	b.waitFor("light theme chosen", "!"+dark, 5*time.Second)
	if got := eval[string](b, `localStorage.getItem('ctibridge.theme')`); got != "light" {
		t.Errorf("theme stored as %q, want light", got)
	}
}
