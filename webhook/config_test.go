package webhook

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckErrors(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600)
	good := func() Config { return hookConfig("crm", "https://crm.example.com/hook") }
	cases := []struct {
		name string
		edit func(c *Config)
		want string // in the error; "" for none
	}{
		{"good", func(c *Config) {}, ""},
		{"secret file", func(c *Config) { c.Secret, c.SecretFile = "", secretFile }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "name: want 1 to 64"},
		{"bad name", func(c *Config) { c.Name = "../x" }, "name: want"},
		{"no url", func(c *Config) { c.URL = "" }, `url: "" is not an http(s) URL`},
		{"ftp url", func(c *Config) { c.URL = "ftp://x/y" }, "is not an http(s) URL"},
		{"short secret", func(c *Config) { c.Secret = "short" }, "secret: want at least 16 bytes"},
		{"two secrets", func(c *Config) { c.SecretFile = secretFile }, "both secret and secret_file"},
		{"missing secret file", func(c *Config) { c.Secret, c.SecretFile = "", filepath.Join(dir, "nope") }, "secret_file:"},
		{"unknown event", func(c *Config) { c.Events = []string{"ringing", "ring"} }, `unknown event "ring"`},
		{"bad extension", func(c *Config) { c.Extensions = []string{"201,202"} }, `"201,202" is not an extension`},
		{"tiny queue", func(c *Config) { c.MaxQueue = 100 }, "below the minimum"},
		{"token and oauth2", func(c *Config) {
			c.Auth = Auth{Token: "t", OAuth2: &OAuth2{TokenURL: "https://a/t", ClientID: "i", ClientSecret: "s"}}
		}, "token and oauth2 both set"},
		{"oauth2 incomplete", func(c *Config) { c.Auth.OAuth2 = &OAuth2{TokenURL: "https://a/t"} }, "client_id and client_secret are required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			err := Check([]Config{c})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if err := Check([]Config{good(), good()}); err == nil || !strings.Contains(err.Error(), `name "crm" used twice`) {
		t.Errorf("duplicate names: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	ok := write("ok.yaml", `webhooks:
  - name: crm
    url: https://crm.example.com/hooks/ctibridge?tenant=7
    secret: "`+testSecret+`"
    events: [ringing, hangup]
    extensions: ["201", "202"]
    timeout: 3s
    auth:
      oauth2: {token_url: "https://auth.example.com/token", client_id: ctibridge, client_secret: s, scopes: [calls]}
  - name: script
    url: http://127.0.0.1:8000/
    secret: "`+testSecret+`"
`)
	cfgs, err := LoadFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 2 || cfgs[0].Timeout != 3*time.Second || len(cfgs[0].Extensions) != 2 || cfgs[0].Auth.OAuth2.ClientID != "ctibridge" {
		t.Fatalf("loaded %+v", cfgs)
	}
	// Files named in it are read once; New checks again.
	tokenFile := write("token", "tok\n")
	secretFile := write("secret", testSecret+"\n")
	files := write("files.yaml", "webhooks:\n  - name: f\n    url: http://127.0.0.1:1/\n    secret_file: "+secretFile+"\n    auth: {token_file: "+tokenFile+"}\n")
	cfgs, err = LoadFile(files)
	if err != nil {
		t.Fatal(err)
	}
	if cfgs[0].Secret != testSecret || cfgs[0].Auth.Token != "tok" {
		t.Fatalf("files not read: %+v", cfgs[0])
	}
	s, err := New(newPBX(t, nil).eng, cfgs, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("New after LoadFile: %v", err)
	}
	s.Close()
	for name, tc := range map[string]struct{ body, want string }{
		"unknown key": {"webhooks:\n  - name: a\n    urll: http://x/\n", "field urll not found"},
		"not yaml":    {"webhooks: [", "webhook: "},
		"empty":       {"webhooks: []\n", "no webhooks listed"},
		"invalid":     {"webhooks:\n  - name: a\n    url: http://x/\n", "secret: want at least 16 bytes"},
	} {
		_, err := LoadFile(write(strings.ReplaceAll(name, " ", "_")+".yaml", tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestSignatureOpenSSL: the shell recipe of docs/webhooks.md (openssl
// dgst -hmac over "<timestamp>.<body>") computes the same signature.
func TestSignatureOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	body := []byte(`{"id":"1.0:1.1:ringing","type":"ringing"}`)
	ts := int64(1796028439)
	cmd := exec.Command("sh", "-c", `printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac "$SECRET" | sed 's/^.*= //'`)
	cmd.Env = append(os.Environ(), "TS="+strconv.FormatInt(ts, 10), "BODY="+string(body), "SECRET="+testSecret)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := "v1="+strings.TrimSpace(string(out)), Sign(testSecret, ts, body); got != want {
		t.Fatalf("openssl: %s, Sign: %s", got, want)
	}
	if err := Verify(testSecret, Sign(testSecret, ts, body), "1796028439", body, time.Unix(ts+400, 0), 5*time.Minute); err == nil {
		t.Error("a replay 400 s late was accepted")
	}
	if err := Verify(testSecret, Sign(testSecret, ts, body), "1796028439", append(body, ' '), time.Unix(ts, 0), 5*time.Minute); err == nil {
		t.Error("a changed body was accepted")
	}
}

// TestRefusedEventSkipped: a 4xx refusal drops that event (counted) and
// the queue goes on; 429 is retried.
func TestRefusedEventSkipped(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusUnprocessableEntity)
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	p := newPBX(t, nil)
	s, err := New(p.eng, []Config{hookConfig("x", srv.URL)}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	p.play(loadAMI(t, "basic_call_caller_hangup"))
	// Queued falls a moment after Delivered rises: wait for both.
	waitStats(t, s, func(st Stats) bool { return st.Delivered == 4 && st.Queued == 0 })
	if st := s.Stats()[0]; st.Dropped != 1 || st.Failed != 1 {
		t.Errorf("stats %+v: want 1 dropped (422), 1 failed (429)", st)
	}
}
