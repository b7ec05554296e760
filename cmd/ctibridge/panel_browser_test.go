package main

// Browser tests of the web panel in real headless Chromium (docs/panel.md):
// TestBrowserDemo drives the panel against the demo (pbxsim, simulated
// phones, the bridge over real AMI); TestBrowserScale measures first paint
// of a 500-extension grid and event-to-screen latency against a small fake
// bridge. Console errors fail the tests. Screenshots go to
// $CTIBRIDGE_ARTIFACTS (default: a new temporary directory, logged).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/panel"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// chromiumPath finds Debian's Chromium; "" when it is not installed.
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// artifactsDir is where screenshots go.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CTIBRIDGE_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ctibridge-panel-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// wsFrame is a WebSocket message the page received, as the browser saw it.
type wsFrame struct {
	Op   string          `json:"op"`
	Seq  uint64          `json:"seq"`
	Type string          `json:"type"`
	At   int64           `json:"at"`
	Data json.RawMessage `json:"data"`
}

// browser is one headless Chromium tab with its console errors and the
// WebSocket frames it received.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu     sync.Mutex
	errs   []string
	frames []wsFrame
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	b := &browser{t: t, ctx: ctx, dir: artifactsDir(t)}
	if _, err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, cmp.Or(a.Description, string(a.Value)))
				}
				b.errs = append(b.errs, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.errs = append(b.errs, "exception: "+msg)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				b.errs = append(b.errs, fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventWebSocketFrameReceived:
			var f wsFrame
			if e.Response != nil && json.Unmarshal(e.Response.PayloadData, &f) == nil {
				if f.Op == "snapshot" {
					f.Data = nil // large; only its arrival matters
				}
				b.frames = append(b.frames, f)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(b.checkConsole)
	return b
}

// checkConsole fails the test on any console error.
func (b *browser) checkConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("console error: %s", e)
	}
}

// run runs a subtest whose failures the browser helpers report.
func (b *browser) run(name string, f func(t *testing.T)) {
	b.t.Run(name, func(t *testing.T) {
		parent := b.t
		b.t = t
		defer func() { b.t = parent }()
		f(t)
	})
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression and decodes its value into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true.
func (b *browser) waitFor(what, expr string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if eval[bool](b, "!!("+expr+")") {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed-" + strings.NewReplacer(" ", "-", "/", "-").Replace(what))
			dump := eval[string](b, gridDumpJS)
			if len(dump) > 1500 {
				dump = dump[:1500] + "..."
			}
			b.t.Fatalf("waited %v for %s (%s); grid: %s", timeout, what, expr, dump)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shot saves a screenshot of the viewport.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

func (b *browser) wsFrames() []wsFrame {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.frames)
}

func (b *browser) login(user, pass string) {
	b.t.Helper()
	b.waitFor("login form", `document.querySelector('#login-user') && !document.querySelector('#login-view').hidden`, 10*time.Second)
	b.do(
		chromedp.SendKeys(chromedp.CSS("#login-user"), user),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), pass),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
	)
	b.waitFor("the app after login", `!document.querySelector('#app').hidden`, 10*time.Second)
}

// gridDumpJS describes the grid, for failure messages.
const gridDumpJS = `JSON.stringify([...document.querySelectorAll('#grid li.card')].map(li => li.dataset.exten + ':' + li.dataset.status + ':' + li.querySelector('.peer').textContent))`

// cardJS returns a card's status, counterpart and duration.
func cardJS(exten string) string {
	return fmt.Sprintf(`(() => { const li = document.querySelector('#grid li[data-exten="%s"]');
		return li ? {status: li.dataset.status, peer: li.querySelector('.peer').textContent, dur: li.querySelector('.dur').textContent} : null })()`, exten)
}

func cardIs(exten, status, peerHas string) string {
	return fmt.Sprintf(`(() => { const c = %s; return c && c.status === %q && c.peer.includes(%q) })()`, cardJS(exten), status, peerHas)
}

// recorderJS records, in window.__rec, every status change of a card and
// every banner state, with the time the frame after it was drawn (epoch
// ms, fractional): the moment the change is on screen.
const recorderJS = `(() => {
	if (window.__rec) return true;
	const rec = window.__rec = {cards: [], banner: [], loaded: performance.timeOrigin};
	const now = () => performance.timeOrigin + performance.now();
	new MutationObserver((muts) => {
		const seen = [];
		for (const m of muts) if (m.target.matches && m.target.matches('li.card')) seen.push([m.target.dataset.exten, m.target.dataset.status, m.target.querySelector('.peer').textContent]);
		if (seen.length) requestAnimationFrame(() => { const t = now(); for (const [exten, status, peer] of seen) rec.cards.push({exten, status, peer, t}); });
	}).observe(document.querySelector('#grid'), {attributes: true, subtree: true, attributeFilter: ['data-status', 'class']});
	new MutationObserver(() => rec.banner.push(document.querySelector('#banner').dataset.state))
		.observe(document.querySelector('#banner'), {attributes: true, attributeFilter: ['data-state']});
	return true;
})()`

type cardMark struct {
	Exten, Status, Peer string
	T                   float64
}

// frontServer serves the panel in front of a bridge and can cut every
// connection the browser has open (HTTP and WebSocket alike).
type frontServer struct {
	URL string
	srv *http.Server
	ln  *trackingListener
}

type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns[c] = struct{}{}
		l.mu.Unlock()
	}
	return c, err
}

// cut closes every connection accepted so far.
func (l *trackingListener) cut() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.conns)
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
	return n
}

// startFront serves h on a loopback port.
func startFront(t *testing.T, h http.Handler) *frontServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: ln, conns: map[net.Conn]struct{}{}}
	fs := &frontServer{URL: "http://" + ln.Addr().String() + "/", srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: tl}
	go fs.srv.Serve(tl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		fs.srv.Shutdown(ctx)
		tl.cut()
	})
	return fs
}

// panelFront proxies everything to the bridge at target, except the
// panel itself while the bridge does not serve it yet.
func panelFront(t *testing.T, target string) *frontServer {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = nil
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	if !servesPanel(target) {
		t.Log("the bridge does not serve the panel at / yet: serving panel.Handler() in front of it")
		p := panel.Handler()
		mux.Handle("GET /{$}", p)
		mux.Handle("GET "+panel.Prefix, p)
	}
	return startFront(t, mux)
}

func servesPanel(base string) bool {
	res, err := http.Get(base)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	return res.StatusCode == 200 && strings.HasPrefix(res.Header.Get("Content-Type"), "text/html")
}

// routed reports whether the bridge answers a path with something other
// than its catch-all 404 (a route that exists answers 200, 400, 404 with
// another code...). The caller owns token.
func routed(t *testing.T, base, token, method, path, body string) bool {
	t.Helper()
	req, _ := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusNotFound && (strings.Contains(string(b), "no route") || strings.Contains(string(b), "not_found") && !strings.Contains(string(b), "contact")) {
		return false
	}
	return res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed
}

func restLogin(t *testing.T, base, user, pass string) string {
	t.Helper()
	res, err := http.Post(base+"auth/login", "application/json", strings.NewReader(fmt.Sprintf(`{"username":%q,"password":%q}`, user, pass)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var l struct{ Token string }
	json.NewDecoder(res.Body).Decode(&l)
	if l.Token == "" {
		t.Fatalf("login %s: %s", user, res.Status)
	}
	return l.Token
}

// TestBrowserDemo: log in as the operator (phone 203), watch calls between
// simulated phones, click to call, hang up, take an incoming call with its
// pop-up, transfer it, search the phonebook, and see the banners when the
// WebSocket and the AMI link are cut.
func TestBrowserDemo(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: 8, ring: 700 * time.Millisecond, dataDir: t.TempDir()}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("demo did not stop")
		}
	})
	var d demoInfo
	select {
	case d = <-info:
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	front := panelFront(t, d.URL)
	token := restLogin(t, d.URL, "operator", "operator")
	// Every route the panel uses must be there: a missing one fails the
	// test rather than skipping what depends on it.
	for _, path := range []string{"/ws", "/phonebook/search/zz", "/historycall/interval/user/operator/20260101/20260102"} {
		if !routed(t, d.URL, token, "GET", path, "") {
			t.Fatalf("the bridge does not route GET %s, which the panel uses", path)
		}
	}

	b := newBrowser(t, 1280, 720)
	b.do(chromedp.Navigate(front.URL))
	b.login("operator", "operator")
	b.waitFor("8 extensions", `document.querySelectorAll('#grid li.card').length === 8`, 10*time.Second)
	eval[bool](b, recorderJS)
	eval[bool](b, `window.__noReload = true`)
	b.waitFor("203 online", cardIs("203", "online", ""), 10*time.Second)
	b.shot("grid")
	phones := d.Phones
	wait := 10 * time.Second

	b.run("call between phones", func(t *testing.T) {
		pending := placeCall(ctx, phones["201"], "202")
		b.waitFor("202 ringing from 201", cardIs("202", "ringing", "201"), wait)
		b.waitFor("201 calling 202", `(() => { const c = `+cardJS("201")+`; return c && c.peer.includes('202') && c.status !== 'online' })()`, wait)
		b.shot("ringing")
		b.waitFor("202 busy with 201", cardIs("202", "busy", "201"), wait)
		b.waitFor("201 busy with 202", cardIs("201", "busy", "202"), wait)
		b.waitFor("201's talk time ticking", `/^0:0[1-9]$/.test(`+cardJS("201")+`.dur)`, 4*time.Second)
		b.shot("busy")
		call := waitCall(t, pending)
		call.hangup(t)
		b.waitFor("201 online", cardIs("201", "online", ""), wait)
		b.waitFor("202 online", cardIs("202", "online", ""), wait)
	})

	b.run("click to call and hang up", func(t *testing.T) {
		b.do(chromedp.Click(chromedp.CSS(`#grid li[data-exten="202"] button.call-btn`)))
		b.waitFor("203 and 202 connected", cardIs("203", "busy", "202")+" && "+cardIs("202", "busy", "203"), 15*time.Second)
		b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected .peer')?.textContent.includes('202')`, wait)
		b.shot("mycalls")
		if !eval[bool](b, `document.querySelector('#popup').hidden`) {
			t.Error("the pop-up showed for the first leg of our own click-to-call")
		}
		b.do(chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="hangup"]`)))
		b.waitFor("203 online", cardIs("203", "online", ""), wait)
		b.waitFor("202 online", cardIs("202", "online", ""), wait)
		b.waitFor("no call in my calls bar", `document.querySelectorAll('#mycalls .call-row').length === 0`, wait)
	})

	b.run("phonebook", func(t *testing.T) {
		b.do(chromedp.Click(chromedp.CSS("#tab-phonebook")), chromedp.Click(chromedp.CSS("#pb-new")))
		b.waitFor("contact dialog", `document.querySelector('#contact-dialog').open`, wait)
		b.do(
			chromedp.SendKeys(chromedp.CSS("#c-name"), "Mario Panelli"),
			chromedp.SendKeys(chromedp.CSS("#c-company"), "ACME"),
			chromedp.SendKeys(chromedp.CSS("#c-work"), "201"),
			chromedp.Click(chromedp.CSS(`#contact-form button[type="submit"]`)),
		)
		b.waitFor("dialog closed", `!document.querySelector('#contact-dialog').open`, wait)
		// Saving searched for the new contact and filled the box: replace
		// its text rather than append to it.
		eval[bool](b, `(document.querySelector('#pb-term').value = '', true)`)
		b.do(chromedp.SendKeys(chromedp.CSS("#pb-term"), "Panelli"),
			chromedp.Click(chromedp.CSS(`#pb-search button[type="submit"]`)))
		b.waitFor("the contact found", `[...document.querySelectorAll('#pb-results tbody tr')].some(tr => tr.textContent.includes('Mario Panelli') && tr.textContent.includes('201'))`, wait)
		b.shot("phonebook")
		b.do(chromedp.Click(chromedp.CSS("#tab-ext")))
	})

	b.run("incoming call pop-up and transfer", func(t *testing.T) {
		pending := placeCall(ctx, phones["201"], "203")
		b.waitFor("the pop-up", `!document.querySelector('#popup').hidden && document.querySelector('#popup-caller').textContent.includes('201')`, wait)
		b.waitFor("the phonebook match in the pop-up", `document.querySelector('#popup-match').textContent.includes('Mario Panelli')`, 3*time.Second)
		b.shot("popup")
		b.waitFor("pop-up gone once answered", `document.querySelector('#popup').hidden`, wait)
		b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected .peer')?.textContent.includes('201')`, wait)
		call := waitCall(t, pending)
		b.do(
			chromedp.SendKeys(chromedp.CSS(`#mycalls .call-row input.xfer-to`), "202"),
			chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="blind"]`)),
		)
		b.waitFor("201 transferred to 202", cardIs("201", "busy", "202")+" && "+cardIs("202", "busy", "201"), 15*time.Second)
		b.waitFor("203 free", cardIs("203", "online", ""), wait)
		b.shot("transferred")
		call.hangup(t)
		b.waitFor("201 online", cardIs("201", "online", ""), wait)
		b.waitFor("202 online", cardIs("202", "online", ""), wait)
	})

	b.run("queues, park and pick up", func(t *testing.T) {
		b.do(chromedp.Click(chromedp.CSS("#tab-queues")))
		b.waitFor("the support queue with its members", `[...document.querySelectorAll('#queues .queue')].some(q => q.textContent.includes('support') && q.querySelectorAll('.member').length === 2)`, wait)
		b.do(chromedp.Click(chromedp.CSS("#tab-ext")))
		pending := placeCall(ctx, phones["201"], "203")
		b.waitFor("the call in my calls bar", `document.querySelector('#mycalls .call-row.connected .peer')?.textContent.includes('201')`, wait)
		call := waitCall(t, pending)
		b.do(chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="park"]`)))
		b.do(chromedp.Click(chromedp.CSS("#tab-queues")))
		b.waitFor("201 parked", `[...document.querySelectorAll('#parkings .parking.taken')].some(p => p.textContent.includes('201'))`, wait)
		b.waitFor("parking time ticking", `/^0:0[1-9]$/.test(document.querySelector('#parkings .parking.taken .dur')?.textContent)`, 4*time.Second)
		b.shot("queues-parking")
		b.do(chromedp.Click(chromedp.CSS(`#parkings .parking.taken button`)))
		b.waitFor("the parking free again", `!document.querySelector('#parkings .parking.taken')`, wait)
		b.do(chromedp.Click(chromedp.CSS("#tab-ext")))
		b.waitFor("203 talking with 201 again", cardIs("203", "busy", "201")+" && "+cardIs("201", "busy", ""), wait)
		b.do(chromedp.Click(chromedp.CSS(`#mycalls .call-row button[data-role="hangup"]`)))
		b.waitFor("201 online", cardIs("201", "online", ""), wait)
		b.waitFor("203 online", cardIs("203", "online", ""), wait)
		select {
		case <-call.call.Done():
		case <-time.After(5 * time.Second):
			t.Error("201's phone still has the call")
		}
	})

	b.run("history", func(t *testing.T) {
		b.do(chromedp.Click(chromedp.CSS("#tab-history")))
		b.waitFor("history rows", `document.querySelectorAll('#hist-results tbody tr').length > 0`, wait)
		b.shot("history")
		b.do(chromedp.Click(chromedp.CSS("#hist-csv")))
		time.Sleep(300 * time.Millisecond)
		if eval[bool](b, `document.querySelector('#toast').classList.contains('error') && !document.querySelector('#toast').hidden`) {
			t.Errorf("CSV download: %s", eval[string](b, `document.querySelector('#toast').textContent`))
		}
		b.do(chromedp.Click(chromedp.CSS("#tab-ext")))
	})

	b.run("websocket cut and resumed", func(t *testing.T) {
		before := len(b.wsFrames())
		n := front.ln.cut()
		t.Logf("cut %d browser connections", n)
		b.waitFor("reconnecting banner seen", `window.__rec.banner.includes('reconnecting')`, wait)
		b.waitFor("banner gone", `document.querySelector('#banner').hidden`, wait)
		// A change made after the cut reaches the page through the new connection.
		pending := placeCall(ctx, phones["205"], "206")
		// 205 and 206 are outside the operator's groups: presence only.
		b.waitFor("205 busy after the reconnect", cardIs("205", "busy", ""), wait)
		call := waitCall(t, pending)
		call.hangup(t)
		b.waitFor("205 online", cardIs("205", "online", ""), wait)
		if !eval[bool](b, `window.__noReload === true`) {
			t.Error("the page was reloaded")
		}
		resumed := false
		for _, f := range b.wsFrames()[before:] {
			resumed = resumed || f.Op == "resumed"
		}
		if !resumed {
			t.Error(`no {"op":"resumed"} after the reconnect: the panel did not resume with since, or the hub sent a snapshot`)
		}
	})

	b.run("AMI link cut", func(t *testing.T) {
		for _, s := range d.PBX.AMIServer().Sessions() {
			s.Close()
		}
		b.waitFor("PBX banner", `window.__rec.banner.includes('down') || window.__rec.banner.includes('resyncing')`, wait)
		b.shot("pbx-down")
		b.waitFor("banner gone once resynchronised", `document.querySelector('#banner').hidden`, 15*time.Second)
		pending := placeCall(ctx, phones["207"], "208")
		b.waitFor("state live again", cardIs("207", "busy", ""), wait)
		call := waitCall(t, pending)
		call.hangup(t)
	})

	// Event-to-screen latency over the demo: each card status change
	// against the extenUpdate that caused it ("at" is when the engine
	// published it, a little before it left the server).
	marks := eval[[]cardMark](b, `window.__rec.cards`)
	var lat []float64
	frames := b.wsFrames()
	for _, m := range marks {
		var best *wsFrame
		for i := range frames {
			f := &frames[i]
			if f.Type != "extenUpdate" || float64(f.At) > m.T {
				continue
			}
			var x struct{ Exten, Status string }
			json.Unmarshal(f.Data, &x)
			if x.Exten == m.Exten && x.Status == m.Status {
				best = f
			}
		}
		if best != nil {
			lat = append(lat, m.T-float64(best.At))
		}
	}
	if len(lat) < 5 {
		t.Errorf("only %d status changes matched to events", len(lat))
	} else {
		p50, p95, max := stats(lat)
		t.Logf("demo event-to-screen latency over %d changes: p50 %.1f ms, p95 %.1f ms, max %.1f ms", len(lat), p50, p95, max)
		if p95 > 100 {
			t.Errorf("event-to-screen p95 %.1f ms, want < 100 ms", p95)
		}
	}

	b.do(chromedp.Click(chromedp.CSS("#logout")))
	b.waitFor("login form after logout", `!document.querySelector('#login-view').hidden && !sessionStorage.getItem('ctibridge.token')`, wait)
}

type callResult struct {
	call *pbxsim.PhoneCall
	err  error
}

func (c *callResult) hangup(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.call.Hangup(ctx); err != nil {
		t.Errorf("hangup: %v", err)
	}
}

// placeCall dials from a simulated phone; the result comes once the call
// is answered (Phone.Call blocks until then).
func placeCall(ctx context.Context, ph *pbxsim.Phone, number string) <-chan *callResult {
	res := make(chan *callResult, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		c, err := ph.Call(cctx, number)
		res <- &callResult{call: c, err: err}
	}()
	return res
}

// waitCall waits for placeCall's result (the page may see the call before
// the phone has its 200 OK).
func waitCall(t *testing.T, res <-chan *callResult) *callResult {
	t.Helper()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("call: %v", r.err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the simulated call was not answered")
		return nil
	}
}

// Wall-clock bounds of the browser tests, in ms. The panel does far better
// (the tests log the figures; docs/panel.md, "Measured", keeps them); the
// bounds are what a shared 2-core CI machine running other packages under
// -race can hold, so that a failure means a broken panel, not a busy host.
const (
	screenLag     = 1000 // event sent to change drawn, p95
	firstPaintMax = 3000 // 500-card grid after a reload, best of three
)

// stats returns the median, the 95th percentile and the maximum.
func stats(v []float64) (p50, p95, max float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.95), s[len(s)-1]
}

// fakeBridge is the smallest REST + WebSocket server the panel runs
// against, with a synthetic state of n extensions: for measuring, not for
// behaviour (the demo test covers that).
type fakeBridge struct {
	n      int
	events chan fakeEvent
	sent   chan time.Time
}

type fakeEvent struct {
	exten, status string
}

func fakeExt(i int, status string) map[string]any {
	exten := fmt.Sprint(1000 + i)
	x := map[string]any{"exten": exten, "name": fmt.Sprintf("Person %03d", i), "status": status, "dnd": false,
		"cf": "", "cfb": "", "cfu": "", "ip": "127.0.0.1", "port": "5060", "sipuseragent": "sim", "chanType": "pjsip",
		"context": "from-internal", "conversations": map[string]any{}}
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
		var m struct{ Op, Token string }
		if c.ReadJSON(&m) != nil || m.Op != "auth" || m.Token != "tok" {
			return
		}
		c.WriteJSON(map[string]any{"op": "hello", "version": 1, "epoch": "fake"})
		if c.ReadJSON(&m) != nil || m.Op != "subscribe" {
			return
		}
		exts := map[string]any{}
		statuses := []string{"online", "online", "busy", "offline", "online", "ringing", "online", "onhold", "online", "dnd"}
		for i := range f.n {
			exts[fmt.Sprint(1000+i)] = fakeExt(i, statuses[i%len(statuses)])
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
				f.sent <- at
			}
		}
	})
	return mux
}

// TestBrowserScale measures, with 500 extensions, the first paint of the
// grid after a (re)load and the time from an event leaving the server to
// its change being on screen; docs/panel.md has the numbers.
func TestBrowserScale(t *testing.T) {
	const n = 500
	fb := &fakeBridge{n: n, events: make(chan fakeEvent), sent: make(chan time.Time, 1)}
	front := startFront(t, fb.handler())
	b := newBrowser(t, 1280, 720)
	b.do(chromedp.Navigate(front.URL))
	b.login("op", "op")
	b.waitFor("500 cards", fmt.Sprintf(`document.querySelectorAll('#grid li.card').length === %d`, n), 10*time.Second)
	b.shot("grid-500")

	// First paint: reload with the token in sessionStorage; the panel marks
	// "ctib:grid" two frames after it rendered the snapshot.
	var paints []float64
	for range 3 {
		b.do(chromedp.Reload())
		b.waitFor("grid mark", `performance.getEntriesByName('ctib:grid').length > 0`, 10*time.Second)
		paints = append(paints, eval[float64](b, `performance.getEntriesByName('ctib:grid')[0].startTime`))
	}
	if got := eval[int](b, `document.querySelectorAll('#grid li.card').length`); got != n {
		t.Fatalf("%d cards after reload, want %d", got, n)
	}
	_, _, worst := stats(paints)
	best := slices.Min(paints)
	t.Logf("first paint of the %d-extension grid after load: %v ms (best %.0f, worst %.0f ms)", n, paints, best, worst)
	// The best of three is what the panel can do; the others add whatever
	// else the machine was doing (in CI: other test packages, -race). The
	// figure is logged and kept in docs/panel.md; the bound only catches a
	// grid that has become unusable.
	if best > firstPaintMax {
		t.Errorf("first paint %.0f ms at best, want < %d ms", best, firstPaintMax)
	}

	// Latency: an event's send time against the frame drawn after the card changed.
	eval[bool](b, recorderJS)
	var lat []float64
	for i := range 30 {
		exten := fmt.Sprint(1000 + (i*37)%n)
		status := "ringing"
		if eval[string](b, `document.querySelector('#grid li[data-exten="`+exten+`"]').dataset.status`) == "ringing" {
			status = "online"
		}
		fb.events <- fakeEvent{exten, status}
		sent := <-fb.sent
		b.waitFor("card "+exten+" "+status, `window.__rec.cards.some(c => c.exten === '`+exten+`' && c.status === '`+status+`')`, 5*time.Second)
		marks := eval[[]cardMark](b, `window.__rec.cards.filter(c => c.exten === '`+exten+`' && c.status === '`+status+`')`)
		lat = append(lat, marks[len(marks)-1].T-float64(sent.UnixMicro())/1000)
		time.Sleep(30 * time.Millisecond)
	}
	p50, p95, max := stats(lat)
	t.Logf("event-to-screen latency with %d extensions over %d events: p50 %.1f ms, p95 %.1f ms, max %.1f ms", n, len(lat), p50, p95, max)
	if p95 > screenLag {
		t.Errorf("event-to-screen p95 %.1f ms, want < %d ms", p95, screenLag)
	}

	// Keyboard: the first card is in the tab order and arrows move along.
	b.do(chromedp.Focus(chromedp.CSS(`#grid li[tabindex="0"]`)), chromedp.KeyEvent(kb.ArrowRight))
	if got := eval[string](b, `document.activeElement.dataset.exten`); got != "1001" {
		t.Errorf("ArrowRight from the first card focused %q, want 1001", got)
	}
	// The filter narrows the grid.
	b.do(chromedp.SendKeys(chromedp.CSS("#ext-search"), "Person 12"))
	b.waitFor("filtered grid", `[...document.querySelectorAll('#grid li.card')].filter(li => !li.hidden).length === 10`, 5*time.Second)
	eval[bool](b, `(() => { const i = document.querySelector('#ext-search'); i.value = ''; i.dispatchEvent(new Event('input')); return true })()`)
	b.waitFor("unfiltered grid", fmt.Sprintf(`[...document.querySelectorAll('#grid li.card')].filter(li => !li.hidden).length === %d`, n), 5*time.Second)

	// Layout: no horizontal scrolling at 1280x720 nor at tablet width.
	for _, size := range [][2]int64{{1280, 720}, {768, 1024}} {
		b.do(chromedp.EmulateViewport(size[0], size[1]))
		time.Sleep(100 * time.Millisecond)
		if w := eval[int](b, `document.documentElement.scrollWidth`); int64(w) > size[0] {
			t.Errorf("at %dx%d the page is %d px wide: it scrolls sideways", size[0], size[1], w)
		}
		b.shot(fmt.Sprintf("grid-500-%dx%d", size[0], size[1]))
	}
}
