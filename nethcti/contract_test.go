package nethcti

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The contract: what NethVoice's clients send and read, one row per
// call, each citing the client file it was read from (nethesis/
// nethvoice-cti at 67831d4f, nethesis/phone-island at a5f466f, nethesis/
// nethlink at 7ccea1b). A row sends the call as the client does and
// checks the status and that every field the client reads is there
// (paths: a.b, [i] an index, * every value of an object).
type contractRow struct {
	client string // file the row comes from
	method string
	path   string // under /api (Bearer JWT) unless it starts with /webrest
	user   string
	body   string
	status int
	fields []string
	check  func(t *testing.T, f *fixture, r response)
}

// convOf is the id of user's extension's first conversation as the user
// reads it (/api/astproxy/extension/{exten}).
func convOf(t *testing.T, f *fixture, user, exten string) string {
	t.Helper()
	r := f.apiDo("GET", "/astproxy/extension/"+exten, user, "")
	var x struct{ Conversations map[string]any }
	json.Unmarshal(r.body, &x)
	for id := range x.Conversations {
		return id
	}
	t.Fatalf("%s has no conversation: %s", exten, r.body)
	return ""
}

// emptyObject checks an answer is {}: nothing of the kind configured,
// as nethcti-server answers it.
func emptyObject(t *testing.T, _ *fixture, r response) {
	if m, ok := r.json(t).(map[string]any); !ok || len(m) != 0 {
		t.Errorf("got %s, want {}", r.body)
	}
}

// userRows are the contract's logins, users and reads.
func userRows() []contractRow {
	return []contractRow{
		{client: "nethvoice-cti pages/login.tsx doLogin", method: "POST", path: "/login", body: `{"username":"alice","password":"secret"}`,
			status: 200, fields: []string{"token"}, check: func(t *testing.T, _ *fixture, r response) {
				claims := jwtClaims(t, r.json(t).(map[string]any)["token"].(string))
				if _, ok := claims["2fa"].(bool); !ok || claims["id"] != "alice" {
					t.Errorf("claims %v: want a boolean 2fa and id alice", claims)
				}
			}},
		{client: "phone-island src/App.tsx initParamUrl (url, only_queues), nethvoice-cti services/user.ts getParamUrl", method: "GET",
			path: "/user/paramurl", user: "alice", status: 200, check: emptyObject},
		{client: "phone-island src/components/RestAPI.tsx initVideoSources (a failure is an uncaught rejection)", method: "GET",
			path: "/streaming/sources", user: "alice", status: 200, check: emptyObject},
		{client: "nethvoice-cti pages/login.tsx (401 shows Wrong username or password)", method: "POST", path: "/login",
			body: `{"username":"alice","password":"wrong"}`, status: 401},
		{client: "phone-island src/components/RestAPI.tsx (probe of the new API), nethvoice-cti services/user.ts", method: "GET",
			path: "/user/me", user: "alice", status: 200, fields: []string{"username", "name", "mainPresence", "presence", "recallOnBusy",
				"endpoints.mainextension[0].id", "endpoints.extension[0].id", "endpoints.extension[0].type", "endpoints.cellphone",
				"endpoints.voicemail", "default_device.id", "default_device.type", "settings",
				"profile.macro_permissions.presence_panel.value", "profile.macro_permissions.queue_agent.value",
				"profile.macro_permissions.phonebook.value", "profile.macro_permissions.cdr.value", "profile.macro_permissions.qmanager.value",
				"profile.macro_permissions.nethvoice_cti.value", "profile.macro_permissions.settings.value",
				"profile.macro_permissions.customer_card.value", "profile.macro_permissions.nethvoice_cti.permissions.privacy.value",
				"profile.macro_permissions.cdr.permissions.ad_cdr.value", "profile.macro_permissions.settings.permissions.parkings.value",
				"profile.macro_permissions.presence_panel.permissions.hangup.value"}},
		{client: "nethvoice-cti lib/operators.ts buildOperators, phone-island src/services/user.ts getAllUsersEndpoints", method: "GET",
			path: "/user/endpoints/all", user: "alice", status: 200, fields: []string{"alice.name", "alice.username", "alice.mainPresence",
				"alice.presence", "alice.endpoints.extension[0].id", "alice.endpoints.extension[0].type", "alice.endpoints.mainextension[0].id",
				"alice.endpoints.cellphone", "root.username"}},
		{client: "nethvoice-cti lib/operators.ts (groups), nethlink src/shared/useNethVoiceAPI.ts groups", method: "GET",
			path: "/astproxy/opgroups", user: "alice", status: 200, fields: []string{"sales.users[0]"}},
		{client: "nethvoice-cti lib/operators.ts, phone-island src/lib/avatars/avatars.ts", method: "GET", path: "/user/all_avatars",
			user: "alice", status: 200},
		{client: "phone-island src/services/astproxy.ts getAllExtensions, nethvoice-cti lib/operators.ts", method: "GET",
			path: "/astproxy/extensions", user: "alice", status: 200, fields: []string{"*.exten", "*.name", "*.status", "*.dnd", "*.ip",
				"*.port", "*.sipuseragent", "*.username", "201.conversations.*.id", "201.conversations.*.owner",
				"201.conversations.*.counterpartNum", "201.conversations.*.counterpartName", "201.conversations.*.startTime",
				"201.conversations.*.connected", "201.conversations.*.direction", "201.conversations.*.recording",
				"201.conversations.*.throughQueue", "201.conversations.*.queueId", "201.conversations.*.linkedId", "201.conversations.*.uniqueId",
				"201.conversations.*.chSource.callerNum", "201.conversations.*.chSource.callerName", "201.conversations.*.chSource.bridgedNum",
				"201.conversations.*.chDest.callerNum", "201.conversations.*.chDest.callerName", "201.conversations.*.chDest.inConference"},
			check: func(t *testing.T, _ *fixture, r response) {
				exts := r.json(t).(map[string]any)
				if u := exts["202"].(map[string]any)["username"]; u != "bob" {
					t.Errorf("202's username %v, want bob", u)
				}
				// Alice (201) called Bob (202): the id names her channel
				// first (status_actions_during_call.md).
				for _, c := range exts["201"].(map[string]any)["conversations"].(map[string]any) {
					c := c.(map[string]any)
					s, d := c["chSource"].(map[string]any), c["chDest"].(map[string]any)
					if s["channel"] != "PJSIP/201-00000036" || s["callerNum"] != "201" || s["bridgedNum"] != "202" ||
						d["channel"] != "PJSIP/202-00000037" || d["callerNum"] != "202" || d["bridgedNum"] != "201" || d["inConference"] != false {
						t.Errorf("alice's conversation: chSource %v chDest %v", s, d)
					}
				}
			}},
		{client: "nethvoice-cti lib/queuesLib.ts, phone-island (queues)", method: "GET", path: "/astproxy/queues", user: "alice", status: 200,
			fields: []string{"support.queue", "support.name", "support.members.*.loggedIn", "support.members.*.paused",
				"support.members.*.type", "support.waitingCallers.*.num", "support.waitingCallers.*.name",
				"support.waitingCallers.*.position", "support.waitingCallers.*.waitingTime", "support.completedCallsCount",
				"support.abandonedCallsCount", "support.avgHoldTime", "support.serviceLevelPercentage"}},
		{client: "phone-island src/services/user.ts getFeatureCodes (audio_test: the warm-up call), nethvoice-cti lib/devices.tsx getFeatureCodes",
			method: "GET", path: "/astproxy/feature_codes", user: "alice", status: 200, fields: []string{"audio_test"}},
		{client: "nethlink src/shared/useNethVoiceAPI.ts User.heartbeat", method: "POST", path: "/user/nethlink", user: "alice",
			body: `{"extension":"201"}`, status: 200, check: func(t *testing.T, f *fixture, _ response) {
				r := f.apiDo("GET", "/user/nethlink", "alice", "")
				var b struct{ Extension, Timestamp string }
				if err := json.Unmarshal(r.body, &b); err != nil || b.Extension != "201" || b.Timestamp == "" {
					t.Errorf("GET /user/nethlink after the heartbeat: %d %s", r.status, r.body)
				}
			}},
		{client: "nethlink src/shared/useNethVoiceAPI.ts User.heartbeat (another's extension)", method: "POST", path: "/user/nethlink",
			user: "alice", body: `{"extension":"202"}`, status: 403},
		{client: "nethlink src/shared/useNethVoiceAPI.ts User.all", method: "GET", path: "/user/all", user: "alice", status: 200,
			fields: []string{"alice.username", "alice.endpoints.extension[0].id", "bob.username"}},
		{client: "nethvoice-cti lib/queuesLib.ts retrieveQueueStats (components/queues/StatisticsView.tsx)", method: "GET",
			path: "/astproxy/queue_astats", user: "carol", status: 200, fields: []string{"support.calls_taken"},
			check: func(t *testing.T, f *fixture, r response) {
				var got map[string]map[string]any
				json.Unmarshal(r.body, &got)
				var qs map[string]struct {
					Members map[string]struct{ CallsTaken, LastCall float64 }
				}
				json.Unmarshal(f.apiDo("GET", "/astproxy/queues", "carol", "").body, &qs)
				m := qs["support"].Members["203"]
				if len(got) != 1 || m.CallsTaken != 1 || got["support"]["calls_taken"] != m.CallsTaken || got["support"]["last_call_time"] != m.LastCall/1000 {
					t.Errorf("carol's (203) figures %s, want support's member 203's (%+v, last call in seconds)", r.body, m)
				}
			}},
		{client: "nethvoice-cti lib/queuesLib.ts retrieveQueueStats (a user in no queue)", method: "GET",
			path: "/astproxy/queue_astats", user: "alice", status: 200, check: emptyObject},
		{client: "nethvoice-cti lib/queueManager.tsx getQueues (the queue manager: queue_log history)", method: "GET",
			path: "/astproxy/qmanager_queues", user: "root", status: 501},
		{client: "nethvoice-cti lib/queuesLib.ts (recalls: queue_log history)", method: "GET",
			path: "/astproxy/queue_recall/12/support/lost?limit=200&offset=0", user: "carol", status: 501},
		{client: "nethvoice-cti lib/parks.ts", method: "GET", path: "/astproxy/parkings", user: "alice", status: 200,
			fields: []string{"*.parking", "*.name", "*.parkedCaller"}},
	}
}

// actionRows are the contract's actions, settings and tokens.
func actionRows(aliceConv string) []contractRow {
	return []contractRow{
		{client: "nethvoice-cti services/user.ts changeStatus, nethlink setPresence", method: "POST", path: "/user/presence", user: "alice",
			body: `{"status":"dnd"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts callPhysical", method: "POST", path: "/astproxy/call", user: "alice",
			body: `{"endpointId":"201","endpointTpe":"extension","number":"202"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts sendPhysicalDTMF", method: "POST", path: "/astproxy/dtmf", user: "alice",
			body: `{"convid":"` + aliceConv + `","endpointId":"201","tone":"5"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts answerPhysical (Yealink)", method: "POST", path: "/astproxy/answer", user: "alice",
			body: `{"endpointId":"201","endpointType":"extension"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts pausePhysical", method: "POST", path: "/astproxy/toggle_hold", user: "alice",
			body: `{"convid":"` + aliceConv + `","endpointId":"201"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts mutePhysical", method: "POST", path: "/astproxy/toggle_mute", user: "alice",
			body: `{"convid":"` + aliceConv + `","endpointId":"201"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts answerPhysical (a phone with no action URL)", method: "POST", path: "/astproxy/answer",
			user: "bob", body: `{"endpointId":"202","endpointType":"extension"}`, status: 501},
		{client: "phone-island src/services/astproxy.ts parkConversation", method: "POST", path: "/astproxy/park", user: "alice",
			body: `{"applicantId":"201","convid":"` + aliceConv + `","endpointId":"201"}`, status: 200},
		{client: "phone-island src/services/astproxy.ts hangupPhysical (cancel: no convid yet)", method: "POST", path: "/astproxy/cancel",
			user: "carol", body: `{"convid":"","endpointId":"203","endpointType":"extension"}`, status: 200},
		{client: "nethvoice-cti components/operators (hangup_mainexten)", method: "POST", path: "/astproxy/hangup_mainexten", user: "bob",
			body: `{"exten":"202"}`, status: 200},
		{client: "nethvoice-cti lib/queuesLib.ts loginToQueue", method: "POST", path: "/astproxy/queuemember_add", user: "alice",
			body: `{"endpointId":"201","queueId":"support","paused":true}`, status: 200, check: func(t *testing.T, f *fixture, _ response) {
				if !f.front.isMember("201", "support") {
					t.Error("201 not a member of support after queuemember_add")
				}
			}},
		{client: "nethvoice-cti lib/operators.ts pickupCall", method: "POST", path: "/astproxy/pickup_conv", user: "paula",
			body: `{"convid":"x","endpointId":"203","destId":"204"}`, status: 403},
		{client: "nethvoice-cti lib/devices.tsx setMainDevice", method: "POST", path: "/user/default_device", user: "paula",
			body: `{"id":"204"}`, status: 200},
		{client: "nethvoice-cti lib/notifications.ts, lib/incomingCall.ts", method: "POST", path: "/user/settings", user: "paula",
			body: `{"open_param_url":"never","desktop_notifications":true}`, status: 200, check: func(t *testing.T, f *fixture, _ response) {
				me := f.apiDo("GET", "/user/me", "paula", "").json(t).(map[string]any)
				if s := me["settings"].(map[string]any); s["open_param_url"] != "never" || s["desktop_notifications"] != true {
					t.Errorf("settings after POST: %v", s)
				}
				if d := me["default_device"].(map[string]any); d["id"] != "204" {
					t.Errorf("default_device %v", d)
				}
			}},
		{client: "nethvoice-cti services/authentication.ts getPhoneIslandToken", method: "POST", path: "/tokens/persistent/phone-island",
			user: "alice", status: 200, fields: []string{"token"}, check: func(t *testing.T, f *fixture, r response) {
				tok := r.json(t).(map[string]any)["token"].(string)
				if c := jwtClaims(t, tok); c["aud"] != "phone-island" {
					t.Errorf("claims %v", c)
				}
				if me := f.do("GET", "/api/user/me", "", "Authorization", "Bearer "+tok); me.status != 200 {
					t.Errorf("the island's token: /user/me %d", me.status)
				}
				if chk := f.apiDo("GET", "/tokens/persistent/phone-island", "alice", ""); !strings.Contains(string(chk.body), `"exists":true`) {
					t.Errorf("check: %s", chk.body)
				}
				if del := f.apiDo("DELETE", "/tokens/persistent/phone-island", "alice", ""); del.status != 204 {
					t.Errorf("delete: %d", del.status)
				}
				if me := f.do("GET", "/api/user/me", "", "Authorization", "Bearer "+tok); me.status != 401 {
					t.Errorf("the revoked island token: /user/me %d, want 401", me.status)
				}
			}},
	}
}

func TestContract(t *testing.T) {
	f := newFixture(t)
	rows := append(userRows(), actionRows(convOf(t, f, "alice", "201"))...)
	for _, row := range rows {
		t.Run(row.client+" "+row.path, func(t *testing.T) {
			hdr := []string{}
			if row.user != "" {
				hdr = append(hdr, "Authorization", "Bearer "+f.login(row.user))
			}
			r := f.do(row.method, "/api"+row.path, row.body, hdr...)
			if r.status != row.status {
				t.Fatalf("%s %s: %d %s, want %d", row.method, row.path, r.status, r.body, row.status)
			}
			if len(row.fields) > 0 {
				v := r.json(t)
				for _, p := range row.fields {
					if !hasPath(v, p) {
						t.Errorf("%s %s: no %s in %s", row.method, row.path, p, r.body)
					}
				}
			}
			if row.check != nil {
				row.check(t, f, r)
			}
		})
	}
}

// TestContractLegacy is NethLink's and legacy phone-island's flow
// (nethlink src/shared/useNethVoiceAPI.ts login, _toHash, _getHeaders,
// phoneIslandTokenLogin; phone-island src/components/RestAPI.tsx legacy
// mode): the nonce login, then "Authorization: user:token" on /webrest.
func TestContractLegacy(t *testing.T) {
	f := newFixture(t)
	r := f.do("POST", "/webrest/authentication/login", `{"username":"bob","password":"secret"}`)
	digest := r.header.Get("WWW-Authenticate")
	if r.status != 401 || !strings.HasPrefix(digest, "Digest ") {
		t.Fatalf("login: %d %q, want 401 with Digest <nonce>", r.status, digest)
	}
	nonce := strings.Split(digest, " ")[1]
	// crypto-js hmacSHA1(message, key), as NethLink computes it.
	m := hmac.New(sha1.New, []byte("secret"))
	m.Write([]byte("bob:secret:" + nonce))
	tok := hex.EncodeToString(m.Sum(nil))
	auth := []string{"Authorization", "bob:" + tok}
	for _, p := range []string{"/user/me", "/astproxy/extensions", "/astproxy/opgroups", "/astproxy/queues", "/user/endpoints/all", "/user/all_avatars",
		"/user/paramurl", "/streaming/sources"} {
		if g := f.do("GET", "/webrest"+p, "", auth...); g.status != 200 {
			t.Errorf("GET /webrest%s: %d %s", p, g.status, g.body)
		}
	}
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "alice:"+tok); g.status != 401 {
		t.Errorf("bob's token as alice's: %d, want 401", g.status)
	}
	if g := f.do("GET", "/api/user/me", "", "Authorization", "Bearer "+tok); g.status != 401 {
		t.Errorf("a legacy token on /api: %d, want 401 (phone-island then falls back to /webrest)", g.status)
	}
	isl := f.do("POST", "/webrest/authentication/phone_island_token_login", "", auth...)
	var it struct{ Token, Username string }
	json.Unmarshal(isl.body, &it)
	if isl.status != 200 || it.Token == "" || it.Username != "bob" {
		t.Fatalf("phone_island_token_login: %d %s", isl.status, isl.body)
	}
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "bob:"+it.Token); g.status != 200 {
		t.Errorf("the island token: %d", g.status)
	}
	if lo := f.do("POST", "/webrest/authentication/logout", "{}", auth...); lo.status != 200 {
		t.Errorf("logout: %d", lo.status)
	}
	if g := f.do("GET", "/webrest/user/me", "", auth...); g.status != 401 {
		t.Errorf("after logout: %d, want 401", g.status)
	}
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "bob:"+it.Token); g.status != 200 {
		t.Errorf("the island token after the session's logout: %d, want 200 (persistent)", g.status)
	}
	// NethLink's persistent login (auth-exp: no-exp): the token outlives
	// sessions, and its own logout ends it.
	r = f.do("POST", "/webrest/authentication/login", `{"username":"carol","password":"secret"}`, "auth-exp", "no-exp")
	pt := legacyToken("carol", "secret", strings.TrimPrefix(r.header.Get("WWW-Authenticate"), "Digest "))
	f.svc.RevokeUser("carol")
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "carol:"+pt); g.status != 200 {
		t.Errorf("no-exp token: %d", g.status)
	}
	f.do("POST", "/webrest/authentication/logout", "{}", "Authorization", "carol:"+pt, "auth-exp", "no-exp")
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "carol:"+pt); g.status != 401 {
		t.Errorf("no-exp token after its logout: %d, want 401", g.status)
	}
	// The main extension logs in for its user, as in NethCTI.
	r = f.do("POST", "/webrest/authentication/login", `{"username":"202","password":"secret"}`)
	nonce = strings.TrimPrefix(r.header.Get("WWW-Authenticate"), "Digest ")
	m = hmac.New(sha1.New, []byte("secret"))
	m.Write([]byte("202:secret:" + nonce))
	if g := f.do("GET", "/webrest/user/me", "", "Authorization", "202:"+hex.EncodeToString(m.Sum(nil))); g.status != 200 ||
		!strings.Contains(string(g.body), `"username":"bob"`) {
		t.Errorf("login by main extension: %d %s", g.status, g.body)
	}
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a JWT", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// hasPath reports whether v holds path (a.b[0].c; * every value of an
// object, all of which must hold the rest; an empty object fails).
func hasPath(v any, path string) bool {
	if path == "" {
		return true
	}
	head, rest, _ := strings.Cut(path, ".")
	key, idx := head, -1
	if i := strings.IndexByte(head, '['); i >= 0 {
		key = head[:i]
		idx, _ = strconv.Atoi(strings.TrimSuffix(head[i+1:], "]"))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var vals []any
	if key == "*" {
		for _, x := range m {
			vals = append(vals, x)
		}
		if len(vals) == 0 {
			return false
		}
	} else {
		x, ok := m[key]
		if !ok {
			return false
		}
		vals = []any{x}
	}
	for _, x := range vals {
		if idx >= 0 {
			a, ok := x.([]any)
			if !ok || idx >= len(a) {
				return false
			}
			x = a[idx]
		}
		if !hasPath(x, rest) {
			return false
		}
	}
	return true
}

var _ = http.StatusOK
