package main

// TestBrowserPhoneIsland: NethVoice's phone-island widget, the npm
// package as published, in real headless Chromium against the demo with
// the NethCTI front (docs/nethcti-compat.md).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// islandHost is the host name the island is given: it builds
// https://<host>/api/... and its socket.io URL from it and cannot carry
// a port, so Chromium maps it, port 443, to the test's TLS front.
const islandHost = "cti.island.test"

// islandPackages are the npm packages the test bundles, under
// $CTIBRIDGE_NODE_DIR/node_modules (scripts/test.sh installs them).
var islandPackages = []string{"@nethesis/phone-island", "react", "react-dom", "esbuild", "buffer"}

// islandNodeDir is where scripts/test.sh installs the npm packages
// ($CTIBRIDGE_NODE_DIR; by default the user's cache, as test.sh has it).
// Inside the suite (the variable set) a missing package fails the test;
// outside it the test skips and says how to install them.
func islandNodeDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CTIBRIDGE_NODE_DIR")
	inSuite := dir != ""
	if !inSuite {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory for the npm packages: %v", err)
		}
		dir = filepath.Join(cache, "ctibridge", "node")
	}
	for _, p := range islandPackages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			why := "the npm package " + p + " is not in " + dir + " (scripts/test.sh installs the packages this test bundles)"
			if inSuite {
				t.Fatal(why)
			}
			t.Skip(why)
		}
	}
	return dir
}

// buildIsland bundles testdata/island (the host page: it logs in and
// mounts the island) with the packages in node, into a new directory.
func buildIsland(t *testing.T, node string) string {
	t.Helper()
	out := t.TempDir()
	src, err := filepath.Abs("testdata/island")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(node, "node_modules", ".bin", "esbuild"), filepath.Join(src, "host.js"),
		"--bundle", "--outdir="+out, "--log-level=warning",
		`--define:process.env.NODE_ENV="production"`, "--define:global=window")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(node, "node_modules"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, b)
	}
	page, err := os.ReadFile(filepath.Join(src, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "index.html"), page, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// islandFront is the one TLS origin of a NethVoice install: the host page
// at /island/, everything else forwarded unchanged to the bridge at
// target (no prefix stripped: the bridge serves /api, /webrest and the
// sockets itself). It also answers the island's internet probe
// (connectivitycheck.gstatic.com/generate_204, mapped here by Chromium),
// as on a site with internet access. It returns the front's loopback
// address.
func islandFront(t *testing.T, target, static string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.Handle("/island/", http.StripPrefix("/island/", http.FileServer(http.Dir(static))))
	mux.HandleFunc("connectivitycheck.gstatic.com/generate_204", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// islandBrowser opens the host page in a new Chromium, logged in as
// user (login "jwt": POST /api/login; "legacy": the nonce login), and
// waits for the island's socket to be authorized. Chromium maps the
// island's host, port 443, to the front (self-signed certificate), and
// lets the island ring without a click on the page.
func islandBrowser(t *testing.T, front, user, login string) *browser {
	t.Helper()
	b := newBrowser(t, 900, 700,
		chromedp.Flag("host-resolver-rules", "MAP "+islandHost+":443 "+front+", MAP connectivitycheck.gstatic.com:443 "+front),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"))
	// Refusals the island expects: call summaries are not served (it
	// checks for one after an answered call's hang-up, and only logs
	// the failure); the nonce login's first answer is a 401, and so is
	// the island's probe of /api/user/me with a legacy token, which
	// makes it fall back to /webrest.
	b.allow("/summary/")
	if login == "legacy" {
		b.allow("/webrest/authentication/login")
		b.allow("/api/user/me")
	}
	b.do(chromedp.Navigate("https://" + islandHost + "/island/?user=" + user + "&pass=" + user + "&login=" + login))
	b.waitFor(user+" logged in", `window.__login || window.__loginError`, 10*time.Second)
	if e := eval[string](b, `window.__loginError || ''`); e != "" {
		t.Fatalf("%s's %s login: %s", user, login, e)
	}
	b.waitFor(user+"'s socket authorized", `__seen('phone-island-socket-authorized').length > 0`, 15*time.Second)
	return b
}

// islandSeen is a JavaScript test of whether the page saw event name
// with detail matching cond (a JavaScript expression of d).
func islandSeen(name, cond string) string {
	return islandSeenSince(0, name, cond)
}

// islandSeenSince is islandSeen of the events after the first n.
func islandSeenSince(n int, name, cond string) string {
	return fmt.Sprintf(`__events.slice(%d).some(e => { const d = e.detail || {}; return e.name === '%s' && (%s) })`, n, name, cond)
}

// extWait waits until cond holds of exten as GET /astproxy/extension
// answers it.
func extWait(t *testing.T, base, token, exten, what string, timeout time.Duration, cond func(restExt) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		x := extOf(t, base, token, exten)
		if cond(x) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s %s; last: %+v", timeout, exten, what, x)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserPhoneIsland: @nethesis/phone-island, as published on npm,
// mounted in a host page behind one TLS origin, against the demo with
// --nethcti: the operator logs in through POST /api/login (the island
// talks to /api and socket.io at /api/ws), alice through the legacy nonce
// login (/webrest and /socket.io). Both sockets stay up (pings answered,
// no "Connection error"); a call from alice's phone to the operator's
// pops the operator's incoming call view, and hanging up there ends the
// call on the simulated PBX; an answered call shows the call view, and
// its hang-up ends the call too, as it does a call the island started;
// the operator's presence change reaches alice's island.
func TestBrowserPhoneIsland(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("Chromium is not installed (Debian package: chromium)")
	}
	node := islandNodeDir(t)
	static := buildIsland(t, node)
	ring := 6 * time.Second
	d := startDemo(t, 4, ring)
	front := islandFront(t, d.URL, static)
	native := restLogin(t, d.URL, "operator", "operator")

	op := islandBrowser(t, front, "operator", "jwt")
	al := islandBrowser(t, front, "alice", "legacy")
	for _, c := range []struct {
		b          *browser
		user, mode string
	}{{op, "operator", "new"}, {al, "alice", "legacy"}} {
		if m := eval[string](c.b, `localStorage.getItem('phone_island_api_mode_`+c.user+`') || ''`); m != c.mode {
			t.Errorf("%s's island uses the %q API, want %q", c.user, m, c.mode)
		}
		// The island pings every 5 s; each answer removes the socket_down
		// alert (it is set after a ping unanswered for 5 s).
		c.b.waitFor(c.user+"'s ping answered", islandSeen("phone-island-alert-removed", `d.type === 'socket_down'`), 15*time.Second)
		if eval[bool](c.b, `document.body.innerText.includes('Connection error')`) {
			t.Errorf("%s's island shows a connection error", c.user)
		}
	}
	op.shot("island-idle")
	r := islandRun{d: d, native: native, op: op, al: al, ring: ring}
	r.callsIn()
	r.callOut()
	r.presence()
	for _, b := range []*browser{op, al} {
		if eval[bool](b, `document.body.innerText.includes('Connection error')`) {
			t.Error("an island shows a connection error")
		}
	}
}

// islandRun is the islands of TestBrowserPhoneIsland and what they run
// against: the operator's (op, logged in with the JWT) and alice's (al,
// with the legacy token).
type islandRun struct {
	d      demoInfo
	native string // the operator's native token, for REST checks
	op, al *browser
	ring   time.Duration // how long the demo's phones ring before answering
}

// callsIn: calls from alice's phone to the operator's, hung up from the
// operator's island, ringing and answered.
func (r islandRun) callsIn() {
	ctx, op, al, wait := context.Background(), r.op, r.al, 10*time.Second
	op.run("incoming call, hung up from the island", func(t *testing.T) {
		pending := placeCall(ctx, r.d.Phones["201"], "203")
		op.waitFor("the incoming call view", `document.querySelector('[data-tooltip-content="Answer"]') && document.body.innerText.includes('Alice Rossi')`, wait)
		op.shot("island-incoming")
		al.waitFor("alice's outgoing call view", `document.body.innerText.includes('Carol Bianchi') && document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
		al.shot("island-outgoing")
		op.do(chromedp.Click(chromedp.CSS(`[data-tooltip-content="Hangup"]`)))
		select {
		case r := <-pending:
			if r.err == nil {
				t.Fatal("the call was answered: the island's hang-up did not end it")
			}
			t.Logf("201's call ended before the answer: %v", r.err)
		case <-time.After(r.ring):
			t.Fatal("the call still rings on the simulated PBX after the island's hang-up")
		}
		pollREST(t, r.d.URL, r.native, "/astproxy/extension/203", "203 free", func(x restExt) bool {
			return x.Status == "online" && len(x.Conversations) == 0
		})
		op.waitFor("the call view closed", `!document.querySelector('[data-tooltip-content="Answer"]') && !document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
		al.waitFor("alice's call view closed", `!document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
	})

	op.run("answered call, hung up from the island", func(t *testing.T) {
		pending := placeCall(ctx, r.d.Phones["201"], "203")
		op.waitFor("the incoming call view", `document.querySelector('[data-tooltip-content="Answer"]')`, wait)
		call := waitCall(t, pending) // 203's phone answers after the ring
		op.waitFor("the call view, answered", islandSeen("phone-island-call-answered", "true")+
			` && !document.querySelector('[data-tooltip-content="Answer"]') && document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
		op.shot("island-call")
		op.do(chromedp.Click(chromedp.CSS(`[data-tooltip-content="Hangup"]`)))
		select {
		case <-call.call.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("201's phone still has the call after the island's hang-up")
		}
		pollREST(t, r.d.URL, r.native, "/astproxy/extension/203", "203 free", func(x restExt) bool {
			return x.Status == "online" && len(x.Conversations) == 0
		})
		op.waitFor("the call view closed", `!document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
	})

}

// callOut: a call the operator's island starts, hung up there.
func (r islandRun) callOut() {
	op, wait := r.op, 10*time.Second
	op.run("call started from the island, hung up there", func(t *testing.T) {
		// The host app's click to call (POST /astproxy/call with the
		// island's endpointTpe): the PBX rings the operator's phone,
		// which answers after the ring and calls 202, which answers too.
		eval[bool](op, `window.dispatchEvent(new CustomEvent('phone-island-call-start', {detail: {number: '202'}}))`)
		extWait(t, r.d.URL, r.native, "202", "talking with 203", 3*r.ring, func(x restExt) bool {
			for _, c := range x.Conversations {
				if c.Connected && c.CounterpartNum == "203" {
					return true
				}
			}
			return false
		})
		op.waitFor("the call view with 202", `!document.querySelector('[data-tooltip-content="Answer"]') && document.querySelector('[data-tooltip-content="Hangup"]') && document.body.innerText.includes('Bob Verdi')`, wait)
		op.shot("island-call-out")
		op.do(chromedp.Click(chromedp.CSS(`[data-tooltip-content="Hangup"]`)))
		for _, x := range []string{"202", "203"} {
			extWait(t, r.d.URL, r.native, x, "free", wait, func(x restExt) bool {
				return x.Status == "online" && len(x.Conversations) == 0
			})
		}
		op.waitFor("the call view closed", `!document.querySelector('[data-tooltip-content="Hangup"]')`, wait)
	})

}

// presence: a presence change asked of the operator's island reaches
// alice's.
func (r islandRun) presence() {
	op, al, wait := r.op, r.al, 10*time.Second
	op.run("presence change seen by another island", func(t *testing.T) {
		// The host app asks the operator's island to change the presence
		// (it POSTs /user/presence); alice's island tells its app.
		for _, status := range []string{"dnd", "online"} {
			n := eval[int](al, `__events.length`)
			eval[bool](op, `window.dispatchEvent(new CustomEvent('phone-island-presence-change', {detail: {status: '`+status+`'}}))`)
			al.waitFor("operator "+status+" on alice's island",
				islandSeenSince(n, "phone-island-main-presence", `d.operator && d.operator.mainPresence === '`+status+`'`), wait)
		}
	})
}
