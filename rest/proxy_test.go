package rest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 127.0.0.1, ::1 ,10.1.2.3/8,, ::ffff:192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	if got, err := ParseTrustedProxies(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
}

func TestClientAddr(t *testing.T) {
	trusted, _ := ParseTrustedProxies("127.0.0.1, 10.0.0.0/8")
	cases := []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string
	}{
		{"no trust configured: the peer, header ignored", "127.0.0.1:5000", []string{"198.51.100.7"}, nil, "127.0.0.1:5000"},
		{"untrusted peer: header ignored", "203.0.113.9:5000", []string{"198.51.100.7"}, trusted, "203.0.113.9:5000"},
		{"trusted proxy: the client it names", "127.0.0.1:5000", []string{"198.51.100.7"}, trusted, "198.51.100.7"},
		{"chain: right-most untrusted wins over forged left entries", "127.0.0.1:5000", []string{"1.1.1.1, 198.51.100.7, 10.0.0.5"}, trusted, "198.51.100.7"},
		{"several header lines read as one list", "127.0.0.1:5000", []string{"1.1.1.1", "198.51.100.7"}, trusted, "198.51.100.7"},
		{"only proxies: the left-most proxy", "127.0.0.1:5000", []string{"10.0.0.9, 10.0.0.5"}, trusted, "10.0.0.9"},
		{"no header: the proxy itself", "127.0.0.1:5000", nil, trusted, "127.0.0.1"},
		{"garbage entry: stop at the last good address", "127.0.0.1:5000", []string{"198.51.100.7, bogus"}, trusted, "127.0.0.1"},
		{"IPv6 client", "127.0.0.1:5000", []string{"2001:db8::1"}, trusted, "2001:db8::1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/auth/login", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, c.trusted); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestLoginRateLimitBehindProxy: behind nginx every login comes from
// 127.0.0.1; with the proxy trusted, one client spending its attempts does
// not lock out the others.
func TestLoginRateLimitBehindProxy(t *testing.T) {
	for _, trust := range []bool{false, true} {
		cfg := Config{Auth: auth.NewService(testUsers(t), auth.Config{TokenTTL: time.Hour, UserBurst: 100, IPBurst: 2, IPEvery: time.Hour}),
			State: engineState{resttest.Engine(resttest.Options{Extensions: 2})}, AccessLogEvery: -1}
		if trust {
			cfg.TrustedProxies, _ = ParseTrustedProxies("127.0.0.1")
		}
		h, err := newHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		login := func(client string) int {
			r := httptest.NewRequest("POST", "/auth/login", strings.NewReader(`{"username":"alice","password":"wrong"}`))
			r.RemoteAddr = "127.0.0.1:40000"
			r.Header.Set("X-Forwarded-For", client)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		login("198.51.100.1")
		login("198.51.100.1")
		if got := login("198.51.100.1"); got != http.StatusTooManyRequests {
			t.Errorf("trust=%v: third attempt of one client: %d, want 429", trust, got)
		}
		want := http.StatusUnauthorized // its own budget: a wrong password
		if !trust {
			want = http.StatusTooManyRequests // everyone is 127.0.0.1
		}
		if got := login("198.51.100.2"); got != want {
			t.Errorf("trust=%v: another client: %d, want %d", trust, got, want)
		}
	}
}

// TestLoginGuessingFromTwentyAddresses: behind a trusted proxy, twenty
// client addresses guess alice's password; she still logs in from her
// usual address (a new one waits as the attackers do), and every refusal
// is counted.
func TestLoginGuessingFromTwentyAddresses(t *testing.T) {
	m := NewMetrics()
	cfg := Config{Auth: auth.NewService(testUsers(t), auth.Config{}), Metrics: m,
		State: engineState{resttest.Engine(resttest.Options{Extensions: 2})}, AccessLogEvery: -1}
	cfg.TrustedProxies, _ = ParseTrustedProxies("127.0.0.1")
	h, err := newHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	login := func(client, password string) int {
		r := httptest.NewRequest("POST", "/auth/login", strings.NewReader(`{"username":"alice","password":"`+password+`"}`))
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("X-Forwarded-For", client)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if got := login("192.0.2.10", "secret"); got != http.StatusOK {
		t.Fatalf("alice before the attack: %d", got)
	}
	codes := map[int]int{}
	for round := range 15 {
		for i := range 20 {
			codes[login(fmt.Sprintf("198.51.100.%d", i+1), fmt.Sprintf("guess%d", round))]++
		}
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK] != 0 {
		t.Fatalf("attack answers: %v", codes)
	}
	t.Logf("300 guesses from 20 addresses answered %v", codes)
	if got := login("192.0.2.10", "secret"); got != http.StatusOK {
		t.Errorf("alice from her usual address during the attack: %d", got)
	}
	if got := login("203.0.113.5", "secret"); got != http.StatusTooManyRequests {
		t.Errorf("alice from a new address during the attack: %d, want 429 (the name's shared delay)", got)
	}
	for _, reason := range []string{"bad_credentials", auth.ByUserAddress, auth.ByUser} {
		if counterValue(t, m, "ctibridge_login_refusals_total", reason) == 0 {
			t.Errorf("no refusal counted as %s", reason)
		}
	}
}
