package nethcti

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
)

var testUserNames = []string{"alice", "bob", "carol", "paula", "root"}

// TestReadsSameAsNative: every read the front serves from the native API
// shows each user exactly what the native read shows that user (the
// visibility class, the hidden numbers, the opaque channels), the
// extensions with their owner's username added and nothing else.
func TestReadsSameAsNative(t *testing.T) {
	f := newFixture(t)
	owners := map[string]string{"201": "alice", "202": "bob", "203": "carol", "204": "paula"}
	paths := []string{"/astproxy/extensions", "/astproxy/extension/201", "/astproxy/extension/203", "/astproxy/queues",
		"/astproxy/queue/support", "/astproxy/parkings", "/astproxy/trunks", "/astproxy/conversations", "/user/presence",
		"/user/presencelist", "/voicemail/new_counters", "/astproxy/conferences"}
	for _, user := range testUserNames {
		for _, p := range paths {
			got, want := f.apiDo("GET", p, user, ""), f.nativeDo("GET", p, user, "")
			if got.status != want.status {
				t.Errorf("%s %s: front %d, native %d", user, p, got.status, want.status)
				continue
			}
			if want.status != http.StatusOK {
				continue
			}
			gv, wv := got.json(t), want.json(t)
			if strings.HasPrefix(p, "/astproxy/extension") {
				exts := map[string]any{}
				if p == "/astproxy/extensions" {
					exts = gv.(map[string]any)
				} else {
					exts[p[len("/astproxy/extension/"):]] = gv
				}
				for k, x := range exts {
					m := x.(map[string]any)
					if m["username"] != owners[k] {
						t.Errorf("%s %s: %s's username %v, want %q", user, p, k, m["username"], owners[k])
					}
					delete(m, "username")
					for _, c := range m["conversations"].(map[string]any) {
						c := c.(map[string]any)
						src, dst, _ := strings.Cut(c["id"].(string), ">")
						s, d := c["chSource"].(map[string]any), c["chDest"].(map[string]any)
						if s["channel"] != src || d["channel"] != dst {
							t.Errorf("%s %s: channels %v %v of %v", user, p, s["channel"], d["channel"], c["id"])
						}
						delete(c, "chSource")
						delete(c, "chDest")
					}
				}
			}
			unshape(t, p, gv)
			if !reflect.DeepEqual(gv, wv) {
				t.Errorf("%s %s: the front shows\n%s\nthe native API\n%s", user, p, got.body, want.body)
			}
		}
	}
	// What carol may not see stays hidden (the queue caller is hers to
	// see: 203 rings with it; Alice's call with Bob is not).
	r := f.apiDo("GET", "/astproxy/extension/201", "carol", "")
	if strings.Contains(string(r.body), "PJSIP/201-") || strings.Contains(string(r.body), `"counterpartNum":"202"`) {
		t.Errorf("carol sees alice's call: %s", r.body)
	}
}

// unshape takes NethCTI's names added to the queue and parking reads
// (shapes.go) out of v, checking each against the native field it
// copies.
func unshape(t *testing.T, path string, v any) {
	t.Helper()
	each := func(f func(map[string]any)) {
		if strings.HasPrefix(path, "/astproxy/queue/") {
			f(v.(map[string]any))
			return
		}
		for _, e := range v.(map[string]any) {
			f(e.(map[string]any))
		}
	}
	same := func(m map[string]any, added, native string) {
		if !reflect.DeepEqual(m[added], m[native]) {
			t.Errorf("%s: %s %v, %s %v", path, added, m[added], native, m[native])
		}
		delete(m, added)
	}
	switch {
	case strings.HasPrefix(path, "/astproxy/queue"):
		each(func(q map[string]any) {
			for a, n := range map[string]string{"completedCallsCount": "completed", "abandonedCallsCount": "abandoned",
				"avgHoldTime": "holdTime", "avgTalkTime": "talkTime", "serviceLevelTimePeriod": "serviceLevel"} {
				same(q, a, n)
			}
			if _, ok := q["serviceLevelPercentage"].(string); !ok {
				t.Errorf("%s: serviceLevelPercentage %v", path, q["serviceLevelPercentage"])
			}
			delete(q, "serviceLevelPercentage")
			for _, m := range q["members"].(map[string]any) {
				m := m.(map[string]any)
				same(m, "callsTakenCount", "callsTaken")
				same(m, "lastPausedInReason", "pausedReason")
				if m["queue"] != q["queue"] {
					t.Errorf("%s: member's queue %v", path, m["queue"])
				}
				delete(m, "queue")
			}
			for _, c := range q["waitingCallers"].(map[string]any) {
				c := c.(map[string]any)
				same(c, "waitingTime", "waitingSince")
				same(c, "id", "channel")
				delete(c, "queue")
			}
		})
	case path == "/astproxy/parkings":
		each(func(p map[string]any) {
			if pc, ok := p["parkedCaller"].(map[string]any); ok && len(pc) == 0 {
				p["parkedCaller"] = nil
			} else if ok {
				delete(pc, "parking")
				delete(pc, "timeout")
			}
		})
	}
}

// TestReadsETag: the extension reads answer 304 to the front's ETag, and
// a new users set (another owner) changes it.
func TestReadsETag(t *testing.T) {
	f := newFixture(t)
	r := f.apiDo("GET", "/astproxy/extensions", "alice", "")
	tag := r.header.Get("Etag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	again := f.do("GET", "/api/astproxy/extensions", "", "Authorization", "Bearer "+f.login("alice"), "If-None-Match", tag)
	if again.status != http.StatusNotModified {
		t.Fatalf("If-None-Match %s: %d", tag, again.status)
	}
	us := testUsers(t).All()
	list := make([]auth.User, 0, len(us))
	for _, u := range us {
		c := *u
		if c.Username == "bob" {
			c.Name = "Robert" // not a grant: bob's sessions go on
		}
		list = append(list, c)
	}
	nu, err := auth.NewUsers(list)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.SetUsers(nu)
	r2 := f.do("GET", "/api/astproxy/extensions", "", "Authorization", "Bearer "+f.login("alice"), "If-None-Match", tag)
	if r2.status != http.StatusOK || r2.header.Get("Etag") == tag {
		t.Errorf("after a new users set: %d %s, want 200 with a new ETag", r2.status, r2.header.Get("Etag"))
	}
}

// TestAuthOnEveryRoute: every route but the logins refuses a request
// without a credential, with a wrong one, and with the other prefix's
// scheme.
func TestAuthOnEveryRoute(t *testing.T) {
	f := newFixture(t)
	jwt := f.login("alice")
	for _, route := range f.front.routes {
		method, path, _ := strings.Cut(route, " ")
		if path == "/login" || path == "/authentication/login" {
			continue
		}
		path = strings.NewReplacer("{audience}", "phone-island", "{subtype}", "nethlink", "{prop}", "avatar", "{exten}", "201",
			"{name}", "hangup", "{queue}", "support", "{endpoint}", "201", "{type}", "busy", "{term}", "x", "{id}", "1").Replace(path)
		for _, c := range []struct{ prefix, auth string }{
			{"/api", ""}, {"/api", "Bearer " + jwt + "x"}, {"/api", "alice:" + jwt}, {"/api", "Bearer a.b.c"},
			{"/webrest", ""}, {"/webrest", "Bearer " + jwt}, {"/webrest", "alice:nope"},
		} {
			hdr := []string{}
			if c.auth != "" {
				hdr = []string{"Authorization", c.auth}
			}
			r := f.do(method, c.prefix+path, "{}", hdr...)
			if r.status != http.StatusUnauthorized && r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s%s with %q: %d %s, want 401", method, c.prefix, path, c.auth, r.status, r.body)
			}
		}
	}
	if len(f.sent()) != 0 {
		t.Errorf("unauthenticated requests reached the PBX: %v", f.sent())
	}
}

// TestRevocation: a JWT ends with its session (an admin's revocation, a
// change of grants), and a persistent token with its user's removal.
func TestRevocation(t *testing.T) {
	f := newFixture(t)
	jwt := f.login("alice")
	isl := f.apiDo("POST", "/tokens/persistent/phone-island", "alice", "")
	var it struct{ Token string }
	json.Unmarshal(isl.body, &it)
	me := func(tok string) int { return f.do("GET", "/api/user/me", "", "Authorization", "Bearer "+tok).status }
	if me(jwt) != 200 || me(it.Token) != 200 {
		t.Fatal("fresh tokens refused")
	}
	if n := f.svc.RevokeUser("alice"); n == 0 {
		t.Fatal("no session revoked")
	}
	if s := me(jwt); s != 401 {
		t.Errorf("JWT after the admin revoked alice's sessions: %d, want 401", s)
	}
	if s := me(it.Token); s != 200 {
		t.Errorf("persistent token after the sessions' revocation: %d, want 200 (it is revoked by its own route)", s)
	}
	var keep []auth.User
	for _, u := range testUsers(t).All() {
		if u.Username != "alice" {
			keep = append(keep, *u)
		}
	}
	nu, _ := auth.NewUsers(keep)
	f.svc.SetUsers(nu)
	if s := me(it.Token); s != 401 {
		t.Errorf("persistent token of a removed user: %d, want 401", s)
	}
	// Logout ends the JWT's session.
	jb := f.login("bob")
	if r := f.do("POST", "/api/logout", "", "Authorization", "Bearer "+jb); r.status != 200 {
		t.Fatalf("logout: %d", r.status)
	}
	if s := me(jb); s != 401 {
		t.Errorf("JWT after logout: %d, want 401", s)
	}
	// A legacy token ends with its session, and is forgotten then.
	lr := f.do("POST", "/webrest/authentication/login", `{"username":"carol","password":"secret"}`)
	tok := legacyToken("carol", "secret", strings.TrimPrefix(lr.header.Get("WWW-Authenticate"), "Digest "))
	if s := f.do("GET", "/webrest/user/me", "", "Authorization", "carol:"+tok).status; s != 200 {
		t.Fatalf("legacy token: %d", s)
	}
	f.svc.RevokeUser("carol")
	if s := f.do("GET", "/webrest/user/me", "", "Authorization", "carol:"+tok).status; s != 401 {
		t.Errorf("legacy token after the revocation: %d, want 401", s)
	}
	if _, held := f.front.creds.legacy[hashOf(tok)]; held {
		t.Error("the ended legacy token is still held")
	}
	// A forged JWT (signed with another secret) is refused.
	other, _ := newKeys([]byte("another secret, 32 bytes long!!!"))
	forged, _ := other.sign(claims{ID: "root", Audience: "phone-island", JTI: "x"})
	if s := me(forged); s != 401 {
		t.Errorf("forged JWT: %d, want 401", s)
	}
}

// TestLoginLimits: the front's logins are the native login: failures
// through either count toward the same per-user limit.
func TestLoginLimits(t *testing.T) {
	f := newFixture(t)
	last := 0
	for i := range 8 {
		path := "/api/login"
		if i%2 == 1 {
			path = "/webrest/authentication/login"
		}
		last = f.do("POST", path, `{"username":"carol","password":"wrong"}`).status
	}
	if last != http.StatusTooManyRequests {
		t.Errorf("8th failed login: %d, want 429", last)
	}
	if s := f.do("POST", "/auth/login", `{"username":"carol","password":"secret"}`).status; s != http.StatusTooManyRequests {
		t.Errorf("native login after the front's failures: %d, want 429", s)
	}
}
