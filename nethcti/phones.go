package nethcti

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/upstream"
)

// Desk phones: answering a call and holding it are done on the phone, not
// on the PBX. NethCTI calls the phone's own HTTP "action URLs" (a virtual
// key press) from a table by user agent; so does the front, through
// pooled upstream clients (one per phone). A phone with no known URL for
// the action gets 501 with the reason, never a silent 200.

// PhoneRule is one vendor's action URLs. Match is a regular expression
// on the phone's SIP User-Agent (case-insensitive); the URLs are
// templates where {ip} is the phone's address (as the PBX registered
// it) and {tone} a DTMF key; "" means the phone has no such action.
type PhoneRule struct {
	Vendor string
	Match  string
	Answer string
	Hold   string
	Mute   string
}

// The actions of a PhoneRule.
const (
	phoneAnswer = iota
	phoneHold
	phoneMute
	numPhoneActions
)

var phoneActionNames = [numPhoneActions]string{"answer", "hold", "mute"}

// DefaultPhones are the action URLs nethcti-server's table
// (phone_urls.json) knows, for Yealink, Snom, Fanvil, Sangoma and
// Nethesis phones, and a Gigaset row without URLs (none is documented
// there: configure them to enable Gigaset). Mute is Yealink's and
// Fanvil's MUTE key.
func DefaultPhones() []PhoneRule {
	return []PhoneRule{
		{Vendor: "Yealink T3x", Match: `^yealink\s.*T3.*\s.+\.70(\..+|$)`,
			Answer: "http://{ip}/cgi-bin/cgiServer.exx?key=OK", Hold: "http://{ip}/cgi-bin/cgiServer.exx?key=F_HOLD"},
		{Vendor: "Yealink (firmware 70)", Match: `^yealink\s.*\s.+\.70(\..+|$)`,
			Answer: "http://{ip}/cgi-bin/ConfigManApp.com?key=OK", Hold: "http://{ip}/cgi-bin/ConfigManApp.com?key=F_HOLD",
			Mute: "http://{ip}/cgi-bin/ConfigManApp.com?key=MUTE"},
		{Vendor: "Yealink", Match: `^yealink\s.+\s.+`,
			Answer: "http://{ip}/servlet?key=OK", Hold: "http://{ip}/servlet?key=F_HOLD", Mute: "http://{ip}/servlet?key=MUTE"},
		{Vendor: "Snom", Match: `^snom`, Answer: "http://{ip}/command.htm?key=ENTER", Hold: "http://{ip}/command.htm?key=F_HOLD"},
		{Vendor: "Sangoma", Match: `^sangoma\s`, Answer: "http://{ip}/Phone_ActionURL&key=OK", Hold: "http://{ip}/Phone_ActionURL&key=F_HOLD"},
		{Vendor: "Fanvil", Match: `^fanvil`, Answer: "http://{ip}/cgi-bin/ConfigManApp.com?key=OK",
			Hold: "http://{ip}/cgi-bin/ConfigManApp.com?key=F_HOLD", Mute: "http://{ip}/cgi-bin/ConfigManApp.com?key=MUTE"},
		{Vendor: "Nethesis", Match: `^Nethesis\s*NP`, Answer: "http://{ip}/cgi-bin/ConfigManApp.com?key=OK",
			Hold: "http://{ip}/cgi-bin/ConfigManApp.com?key=F_HOLD"},
		{Vendor: "Gigaset", Match: `^gigaset`},
	}
}

// CheckPhones reports the first rule whose pattern or URLs are not
// valid (what New would refuse).
func CheckPhones(rules []PhoneRule) error {
	_, err := compilePhones(rules)
	return err
}

type compiledPhone struct {
	vendor string
	re     *regexp.Regexp
	urls   [numPhoneActions]string
}

func compilePhones(rules []PhoneRule) ([]compiledPhone, error) {
	out := make([]compiledPhone, 0, len(rules))
	for _, r := range rules {
		re, err := regexp.Compile("(?i)" + r.Match)
		if err != nil {
			return nil, fmt.Errorf("nethcti: phone %s: %w", r.Vendor, err)
		}
		p := compiledPhone{vendor: r.Vendor, re: re, urls: [numPhoneActions]string{r.Answer, r.Hold, r.Mute}}
		for _, u := range p.urls {
			if u == "" {
				continue
			}
			pu, err := url.Parse(strings.NewReplacer("{ip}", "192.0.2.1", "{tone}", "1").Replace(u))
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || !strings.Contains(u, "{ip}") {
				return nil, fmt.Errorf("nethcti: phone %s: %q is not an http(s) URL on {ip}", r.Vendor, u)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// phoneFor is the first rule matching a user agent, or nil.
func (f *Front) phoneFor(ua string) *compiledPhone {
	if ua == "" {
		return nil
	}
	for i := range f.phones {
		if f.phones[i].re.MatchString(ua) {
			return &f.phones[i]
		}
	}
	return nil
}

// PhoneDoer sends a phone's action URL (a GET) and reports failure.
type PhoneDoer interface {
	Press(ctx context.Context, rawURL string) error
}

// PhoneClient is a PhoneDoer over pooled upstream clients, one per phone
// (scheme and address), made when first needed, all with the same
// credentials (the phones' web user). Safe for concurrent use.
type PhoneClient struct {
	creds   upstream.Credentials
	mu      sync.Mutex
	clients map[string]*upstream.Client
}

// NewPhoneClient returns a PhoneClient logging in to the phones with
// user and password (HTTP basic; both "": none).
func NewPhoneClient(user, password string) *PhoneClient {
	c := &PhoneClient{clients: map[string]*upstream.Client{}}
	if user != "" || password != "" {
		c.creds = upstream.StaticHeader("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	}
	return c
}

// maxPhones bounds the clients kept (one per phone).
const maxPhones = 4096

// Press sends GET rawURL to its phone and wants a 2xx.
func (c *PhoneClient) Press(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	origin := u.Scheme + "://" + u.Host
	c.mu.Lock()
	uc := c.clients[origin]
	if uc == nil {
		if len(c.clients) >= maxPhones {
			for k, old := range c.clients {
				old.Close()
				delete(c.clients, k)
				break
			}
		}
		uc, err = upstream.New(upstream.Config{URLs: []string{origin}, MaxConnsPerHost: 2, Retries: -1, Credentials: c.creds})
		if err != nil {
			c.mu.Unlock()
			return err
		}
		c.clients[origin] = uc
	}
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.RequestURI(), nil)
	if err != nil {
		return err
	}
	resp, err := uc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return errors.New("the phone answered " + resp.Status)
	}
	return nil
}

// Close releases the phones' connections.
func (c *PhoneClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, uc := range c.clients {
		uc.Close()
		delete(c.clients, k)
	}
}
