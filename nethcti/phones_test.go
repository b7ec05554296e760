package nethcti

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestPhoneClient: an action URL reaches the phone through the pooled
// client with the phones' web login, and a phone's refusal is an error.
func TestPhoneClient(t *testing.T) {
	var mu sync.Mutex
	var got []string
	phone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "pw" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("key") == "BROKEN" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer phone.Close()
	ip := strings.TrimPrefix(phone.URL, "http://")
	c := NewPhoneClient("admin", "pw")
	defer c.Close()
	url := expandPhoneURL("http://{ip}/servlet?key=OK", ip)
	for range 2 {
		if err := c.Press(context.Background(), url); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Press(context.Background(), expandPhoneURL("http://{ip}/servlet?key=BROKEN", ip)); err == nil {
		t.Error("a phone's 500 is not an error")
	}
	if err := NewPhoneClient("admin", "nope").Press(context.Background(), url); err == nil {
		t.Error("a refused login is not an error")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 || got[0] != "/servlet?key=OK" {
		t.Errorf("the phone got %v", got)
	}
	if len(c.clients) != 1 {
		t.Errorf("%d clients for one phone, want 1 (pooled)", len(c.clients))
	}
	if u := expandPhoneURL("http://{ip}/x", "fe80::1"); u != "http://[fe80::1]/x" {
		t.Errorf("IPv6: %s", u)
	}
}

// TestDefaultPhones: the default table is valid and finds each vendor's
// rule by user agent (Yealink's three firmware rules in their order).
func TestDefaultPhones(t *testing.T) {
	f := newFixture(t)
	for ua, vendor := range map[string]string{
		"Yealink SIP-T33G 124.86.0.70":   "Yealink T3x",
		"Yealink SIP-T46U 108.86.0.70":   "Yealink (firmware 70)",
		"Yealink SIP-T46S 66.86.0.15":    "Yealink",
		"snom D785/10.1.159.12":          "Snom",
		"Fanvil X4U 2.12.12":             "Fanvil",
		"Gigaset N870 IP PRO/2.60.0":     "Gigaset",
		"Nethesis NP-X3 2.3.1":           "Nethesis",
		"Sangoma S505 V3.0.4.84":         "Sangoma",
		"Linphone/5.2 (belle-sip/5.2.0)": "",
	} {
		p := f.front.phoneFor(ua)
		if (p == nil) != (vendor == "") || p != nil && p.vendor != vendor {
			t.Errorf("%q: %v, want %q", ua, p, vendor)
		}
	}
	if p := f.front.phoneFor("Gigaset N870 IP PRO/2.60.0"); p.urls[phoneAnswer] != "" {
		t.Error("Gigaset has a default URL")
	}
}
