package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestNethCTIDemo: the demo serves NethVoice's clients: the web app's
// JWT login and user, the extensions with usernames, a call placed with
// phone-island's body, NethLink's nonce login; the secret is kept in the
// data directory with mode 0600, and the persistent token's table is
// migrated in the demo's database (the island's token survives reading
// back).
func TestNethCTIDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	dir := t.TempDir()
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: 4, ring: 100 * time.Millisecond, talk: 2 * time.Second, dataDir: dir}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	var d demoInfo
	select {
	case d = <-info:
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	user := d.Users[len(d.Users)-1]
	do := func(method, path, body string, hdr ...string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, strings.TrimSuffix(d.URL, "/")+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	status, _, body := do("POST", "/api/login", `{"username":"`+user.Username+`","password":"`+user.Password+`"}`)
	var login struct{ Token string }
	if json.Unmarshal(body, &login); status != 200 || strings.Count(login.Token, ".") != 2 {
		t.Fatalf("POST /api/login: %d %s", status, body)
	}
	bearer := []string{"Authorization", "Bearer " + login.Token}
	status, _, body = do("GET", "/api/user/me", "", bearer...)
	var me struct {
		Username  string
		Endpoints struct{ Mainextension []struct{ ID string } }
	}
	if json.Unmarshal(body, &me); status != 200 || me.Username != user.Username || len(me.Endpoints.Mainextension) == 0 {
		t.Fatalf("GET /api/user/me: %d %s", status, body)
	}
	main := me.Endpoints.Mainextension[0].ID
	status, _, body = do("GET", "/api/astproxy/extensions", "", bearer...)
	var exts map[string]struct{ Username string }
	if json.Unmarshal(body, &exts); status != 200 || exts[main].Username != user.Username {
		t.Fatalf("GET /api/astproxy/extensions: %d %s", status, body)
	}
	other := "201"
	if main == other {
		other = "202"
	}
	if status, _, body = do("POST", "/api/astproxy/call", `{"endpointId":"`+main+`","endpointTpe":"extension","number":"`+other+`"}`, bearer...); status != 200 {
		t.Fatalf("call with phone-island's body: %d %s", status, body)
	}
	status, hdr, _ := do("POST", "/webrest/authentication/login", `{"username":"`+user.Username+`","password":"`+user.Password+`"}`)
	nonce, ok := strings.CutPrefix(hdr.Get("WWW-Authenticate"), "Digest ")
	if status != 401 || !ok {
		t.Fatalf("legacy login: %d %v", status, hdr)
	}
	m := hmac.New(sha1.New, []byte(user.Password))
	m.Write([]byte(user.Username + ":" + user.Password + ":" + nonce))
	if status, _, body = do("GET", "/webrest/user/me", "", "Authorization", user.Username+":"+hex.EncodeToString(m.Sum(nil))); status != 200 {
		t.Fatalf("legacy /user/me: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body = do("POST", "/api/tokens/persistent/phone-island", "", bearer...)
		if status == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the database may still be migrating
	}
	if status != 200 {
		t.Fatalf("persistent token: %d %s", status, body)
	}
	fi, err := os.Stat(filepath.Join(dir, "nethcti-secret"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v %v", fi, err)
	}
}

// TestCheckConfigNethCTI: check-config reports a bad device type and a
// phone rule the front would refuse, naming the file's lines.
func TestCheckConfigNethCTI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ctibridge.yaml")
	os.WriteFile(cfg, []byte(`ami-user: ctibridge
ami-secret: x
nethcti: true
nethcti-endpoint-types: 92=webrtc,93=fax
nethcti-feature-codes: audio_test=*41,echo=x43
nethcti-phones:
  - vendor: Acme
    match: "^acme"
    answer: "ftp://{ip}/answer"
`), 0o640)
	out, err := checkConfig(t, nil, "--config", cfg)
	if err == nil {
		t.Fatalf("no error; output:\n%s", out)
	}
	for _, w := range []string{`key "nethcti-endpoint-types": nethcti-endpoint-types: "93=fax" is not prefix=webrtc|nethlink|mobile|physical`,
		`key "nethcti-phones": nethcti: phone Acme: "ftp://{ip}/answer" is not an http(s) URL on {ip}`,
		`key "nethcti-feature-codes": nethcti-feature-codes: "echo=x43" is not name=code`} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
	if fc, err := parseFeatureCodes("audio_test=*41, echo=*43"); err != nil || fc["audio_test"] != "*41" || fc["echo"] != "*43" || len(fc) != 2 {
		t.Errorf("feature codes %v %v", fc, err)
	}
}

// TestDemoNethCTISocket: the demo serves NethCTI's socket.io at
// /api/ws: a client logs in with a ctibridge token, gets authe_ok, then
// the demo's calls as extenUpdate with the extension's username.
func TestDemoNethCTISocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0",
		phones: 3, callEvery: 200 * time.Millisecond, talk: time.Second, ring: 100 * time.Millisecond, dataDir: t.TempDir()}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	var d demoInfo
	select {
	case d = <-info:
	case err := <-done:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	u := "ws" + strings.TrimPrefix(d.URL, "http") + "api/ws/?EIO=4&transport=websocket"
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(d.URL+"auth/login", "application/json", strings.NewReader(`{"username":"admin","password":"admin"}`))
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	conn.ReadMessage() // engine.io open
	conn.WriteMessage(websocket.TextMessage, []byte("40"))
	conn.ReadMessage() // namespace joined
	conn.WriteMessage(websocket.TextMessage, []byte(`42["login",{"accessKeyId":"admin","token":"`+login.Token+`","uaType":"desktop"}]`))
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	authed := false
	for {
		_, m, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("authe_ok %v, then: %v", authed, err)
		}
		s := string(m)
		if strings.HasPrefix(s, `42["authe_ok"`) {
			authed = true
		}
		if authed && strings.HasPrefix(s, `42["extenUpdate",`) {
			if !strings.Contains(s, `"username":`) {
				t.Errorf("extenUpdate without username: %s", s)
			}
			break
		}
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("demo: %v", err)
	}
}
