package rest

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/auth"
)

func TestLoginLogoutMe(t *testing.T) {
	f := newFixture(t, false, func(c *Config) {
		c.Auth = auth.NewService(testUsers(t), auth.Config{TokenTTL: time.Hour, UserBurst: 3, IPBurst: 100})
	})
	r := f.do("POST", "/auth/login", "", `{"username":"alice","password":"secret"}`)
	var login struct {
		Token     string `json:"token"`
		ExpiresAt int64  `json:"expiresAt"`
		User      meJSON `json:"user"`
	}
	if err := json.Unmarshal(r.body, &login); err != nil || r.status != 200 || len(login.Token) != 43 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	if d := time.Until(time.UnixMilli(login.ExpiresAt)); d < 59*time.Minute || d > time.Hour {
		t.Errorf("expires in %v", d)
	}
	if login.User.Username != "alice" || login.User.Role != "user" || !slices.Equal(login.User.Endpoints, []string{"2000"}) {
		t.Errorf("user %+v", login.User)
	}
	f.tokens["alice2"] = login.Token
	r = f.do("GET", "/user/me", "alice2", "")
	var me meJSON
	if err := json.Unmarshal(r.body, &me); err != nil || r.status != 200 {
		t.Fatalf("me: %d %s", r.status, r.body)
	}
	if me.Username != "alice" || me.SeesAllCalls || !slices.Equal(me.Scope, []string{"2000"}) || slices.Contains(me.Actions, "pickup_parking") || !slices.Contains(me.Actions, "call") {
		t.Errorf("me %+v", me)
	}
	if r := f.do("POST", "/auth/logout", "alice2", ""); r.status != 200 {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/user/me", "alice2", ""); r.status != 401 || r.errorCode() != "bad_token" {
		t.Errorf("after logout: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/user/me", "root", ""); !strings.Contains(string(r.body), `"scope":null`) || !strings.Contains(string(r.body), `"seesAllCalls":true`) {
		t.Errorf("admin me: %s", r.body)
	}

	for _, c := range []struct{ body, code string }{
		{`{"username":"alice","password":"wrong"}`, "bad_credentials"},
		{`{"username":"nobody","password":"secret"}`, "bad_credentials"},
	} {
		if r := f.do("POST", "/auth/login", "", c.body); r.status != 401 || r.errorCode() != c.code {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	for _, body := range []string{``, `{"username":"alice"}`, `{"username":"alice","password":"x","otp":1}`} {
		if r := f.do("POST", "/auth/login", "", body); r.status != 400 {
			t.Errorf("%q: %d %s", body, r.status, r.body)
		}
	}
	// Burst of 3 per user: alice has spent 2 (one success resets, then 1
	// wrong), so the third wrong one is allowed and the fourth refused.
	f.do("POST", "/auth/login", "", `{"username":"alice","password":"wrong"}`)
	f.do("POST", "/auth/login", "", `{"username":"alice","password":"wrong"}`)
	r = f.do("POST", "/auth/login", "", `{"username":"alice","password":"secret"}`)
	if r.status != 429 || r.errorCode() != "too_many_attempts" || r.header.Get("Retry-After") == "" {
		t.Errorf("rate limit: %d %v %s", r.status, r.header, r.body)
	}
}

func TestOperatorActsOnItsGroup(t *testing.T) {
	f := newFixture(t, true, nil)
	if r := f.do("POST", "/astproxy/hangup", "olga", `{"convid":"`+conv2000+`","endpointId":"2000"}`); r.status != 200 {
		t.Errorf("olga hangs up alice's call: %d %s", r.status, r.body)
	}
}

// TestOpenAPIMatchesRoutes: every routed path is documented and every
// documented path is routed; docs/openapi.yaml is the embedded file.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                          `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	h, err := newHandler(Config{Auth: auth.NewService(nil, auth.Config{}), State: engineState{nil}})
	if err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	for _, r := range h.routes {
		routed[r] = true
		if !documented[r] {
			t.Errorf("%s is routed but not in openapi.yaml", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("%s is in openapi.yaml but not routed", d)
		}
	}
	docs, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(docs) != string(openAPI) {
		t.Error("docs/openapi.yaml differs from rest/openapi.yaml: cp rest/openapi.yaml docs/")
	}
}

// TestSessionsRoutes: a login gives a refresh token, spent once for a new
// session; a user lists and ends only her own sessions, an admin anyone's,
// and an ended session's token stops at once.
func TestSessionsRoutes(t *testing.T) {
	f := newFixture(t, false, func(c *Config) {
		c.Auth = auth.NewService(testUsers(t), auth.Config{TokenTTL: time.Hour})
	})
	var login loginJSON
	r := f.do("POST", "/auth/login", "", `{"username":"alice","password":"secret"}`)
	if err := json.Unmarshal(r.body, &login); err != nil || r.status != 200 || login.RefreshToken == "" || login.SessionID == "" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	var next loginJSON
	r = f.do("POST", "/auth/refresh", "", `{"refreshToken":"`+login.RefreshToken+`"}`)
	if err := json.Unmarshal(r.body, &next); err != nil || r.status != 200 || next.Token == login.Token || next.User.Username != "alice" {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/auth/refresh", "", `{"refreshToken":"`+login.RefreshToken+`"}`); r.status != 401 {
		t.Errorf("second refresh: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/auth/refresh", "", `{}`); r.status != 400 {
		t.Errorf("refresh without token: %d %s", r.status, r.body)
	}
	f.tokens["alice1"], f.tokens["alice2"] = login.Token, next.Token

	var list []sessionJSON
	r = f.do("GET", "/auth/sessions", "alice2", "")
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	for _, s := range list {
		if s.Username != "alice" {
			t.Errorf("alice sees %s's session", s.Username)
		}
	}
	if !slices.ContainsFunc(list, func(s sessionJSON) bool { return s.ID == next.SessionID && s.Current }) {
		t.Errorf("current session not marked: %+v", list)
	}
	if r := f.do("GET", "/auth/sessions?username=bob", "alice2", ""); r.status != 403 {
		t.Errorf("alice lists bob's: %d", r.status)
	}
	if r := f.do("POST", "/auth/sessions/revoke", "alice2", `{"username":"bob"}`); r.status != 403 {
		t.Errorf("alice revokes bob's: %d", r.status)
	}
	if r := f.do("POST", "/auth/sessions/revoke", "alice2", `{"id":"`+login.SessionID+`","username":"alice"}`); r.status != 400 {
		t.Errorf("both id and username: %d", r.status)
	}
	if r := f.do("POST", "/auth/sessions/revoke", "alice2", `{"id":"`+login.SessionID+`"}`); r.status != 200 {
		t.Errorf("alice ends her first session: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/user/me", "alice1", ""); r.status != 401 {
		t.Errorf("ended session's token: %d", r.status)
	}
	r = f.do("GET", "/auth/sessions", "root", "")
	if err := json.Unmarshal(r.body, &list); err != nil || !slices.ContainsFunc(list, func(s sessionJSON) bool { return s.Username == "bob" }) {
		t.Errorf("admin list: %s", r.body)
	}
	if r := f.do("POST", "/auth/sessions/revoke", "root", `{"username":"alice"}`); r.status != 200 || !strings.Contains(string(r.body), `"revoked":`) {
		t.Errorf("admin revokes alice: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/user/me", "alice2", ""); r.status != 401 {
		t.Errorf("alice after the admin's revocation: %d", r.status)
	}
}
