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

	mu      sync.Mutex
	errs    []string
	frames  []wsFrame
	allowed []string // URL paths whose failed requests are expected (refusals under test)
}

// allow expects failed requests to path (every path under it when it
// ends in /): an action the PBX refuses logs its 4xx/5xx in the console,
// which is not a fault of the page.
func (b *browser) allow(path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, path)
}

// newBrowser starts Chromium with the flags the machine needs, and extra.
func newBrowser(t *testing.T, width, height int, extra ...chromedp.ExecAllocatorOption) *browser {
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
	opts = append(opts, extra...)
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
next:
	for _, e := range b.errs {
		for _, p := range b.allowed {
			under := strings.HasSuffix(p, "/") && strings.Contains(e, p)
			if strings.Contains(e, "Failed to load resource") && (strings.HasSuffix(e, p) || under) {
				b.t.Logf("expected refusal: %s", e)
				continue next
			}
		}
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
			toast := eval[string](b, `document.querySelector('#toast')?.textContent || ''`)
			b.t.Fatalf("waited %v for %s (%s); last message %q; grid: %s", timeout, what, expr, toast, dump)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tab opens a view by clicking its tab, again if a banner that came or
// went moved the tab under the click.
func (b *browser) tab(name string) {
	b.t.Helper()
	shown := `!document.querySelector('#view-` + name + `').hidden`
	for range 5 {
		b.do(chromedp.Click(chromedp.CSS("#tab-" + name)))
		if b.waitForMaybe(shown, time.Second) {
			return
		}
	}
	b.t.Fatalf("the %s view does not open", name)
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
// ms, fractional): the moment the change is on screen; and every show and
// hide of the pop-up and every phonebook match it showed.
const recorderJS = `(() => {
	if (window.__rec) return true;
	const rec = window.__rec = {cards: [], banner: [], stale: [], popup: [], popupMatch: [], loaded: performance.timeOrigin};
	const now = () => performance.timeOrigin + performance.now();
	new MutationObserver((muts) => {
		const seen = [];
		for (const m of muts) if (m.target.matches && m.target.matches('li.card')) seen.push([m.target.dataset.exten, m.target.dataset.status, m.target.querySelector('.peer').textContent]);
		if (seen.length) requestAnimationFrame(() => { const t = now(); for (const [exten, status, peer] of seen) rec.cards.push({exten, status, peer, t}); });
	}).observe(document.querySelector('#grid'), {attributes: true, subtree: true, attributeFilter: ['data-status', 'class']});
	new MutationObserver(() => rec.banner.push(document.querySelector('#banner').dataset.state))
		.observe(document.querySelector('#banner'), {attributes: true, attributeFilter: ['data-state']});
	// Whether the views were greyed, at every class change of #app.
	const app = document.querySelector('#app');
	new MutationObserver(() => rec.stale.push(app.classList.contains('stale')))
		.observe(app, {attributes: true, attributeFilter: ['class']});
	// The pop-up's shows and hides and its phonebook matches: one may
	// last less than a poll.
	const pop = document.querySelector('#popup'), match = document.querySelector('#popup-match');
	new MutationObserver(() => rec.popup.push({shown: !pop.hidden, caller: document.querySelector('#popup-caller').textContent, t: now()}))
		.observe(pop, {attributes: true, attributeFilter: ['hidden']});
	new MutationObserver(() => rec.popupMatch.push(match.textContent))
		.observe(match, {childList: true, subtree: true, characterData: true});
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
	screenLag = 1000 // event sent to change drawn, p95, events one at a time
	// screenLagStream is the same at 50 changes a second: on a host whose
	// load average reaches 20 on 2 cores the page gets a fraction of a
	// core and a backlog builds (p95 1.6 s seen once); the figure is logged.
	screenLagStream = 3000
	// firstPaintMax: the 1,000-card grid after a reload, best of three;
	// 3,220 ms was seen at load 15 with five builds running beside it,
	// 6,106 ms at load 18-20 (the whole suite under -race beside six
	// builds); 0.4-0.9 s on a quiet machine (docs/panel.md).
	firstPaintMax = 12000
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
