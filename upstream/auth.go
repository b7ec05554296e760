package upstream

// OAuth2 client credentials (RFC 6749 section 4.4) written here rather than
// taken from golang.org/x/oauth2/clientcredentials: that package caches a
// token until expiry but cannot be told that the server refused it (a
// 401 after a key rotation), so a refresh would mean a new TokenSource per
// rejection; and it would be this package's only dependency. What we need
// is one POST, a cache and single-flight, below.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

type staticHeader struct{ name, value string }

// StaticHeader returns Credentials that set one header on every request,
// such as StaticHeader("Authorization", "Bearer "+token). A 401 is final.
func StaticHeader(name, value string) Credentials { return staticHeader{name, value} }

func (s staticHeader) Apply(req *http.Request) error {
	req.Header.Set(s.name, s.value)
	return nil
}

func (staticHeader) Rejected(*http.Request) bool { return false }

// OAuth2Config configures OAuth2.
type OAuth2Config struct {
	// TokenURL is the token endpoint; ClientID and ClientSecret are sent
	// with HTTP basic authentication (RFC 6749 section 2.3.1).
	TokenURL     string
	ClientID     string
	ClientSecret string
	// Scopes are requested when not empty.
	Scopes []string
	// Leeway: a token is renewed this long before it expires. Default
	// 30 s (a tenth of its lifetime when that is shorter).
	Leeway time.Duration
	// Timeout bounds a token request. Default 10 s.
	Timeout time.Duration
	// HTTP sends token requests. Default a client with its own pool.
	HTTP *http.Client
}

// OAuth2 is Credentials with an OAuth2 client-credentials token: fetched
// when first needed, cached until Leeway before it expires, fetched again
// after a 401. Concurrent requests share one fetch. Safe for concurrent
// use.
type OAuth2 struct {
	// Immutable after NewOAuth2.
	cfg OAuth2Config
	now func() time.Time

	mu      sync.Mutex // guards the fields below
	token   string
	expires time.Time     // zero: no expiry given
	fetch   chan struct{} // closed when the fetch in flight ends; nil if none
	err     error         // of the last fetch
}

// NewOAuth2 returns OAuth2 credentials.
func NewOAuth2(cfg OAuth2Config) (*OAuth2, error) {
	if cfg.TokenURL == "" || cfg.ClientID == "" {
		return nil, errors.New("upstream: oauth2: token URL and client id are required")
	}
	if cfg.Leeway <= 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: cfg.Timeout}
	}
	return &OAuth2{cfg: cfg, now: time.Now}, nil
}

// Apply implements Credentials: it sets "Authorization: Bearer <token>".
func (o *OAuth2) Apply(req *http.Request) error {
	tok, err := o.Token(req.Context())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// Rejected implements Credentials: the token that req carried is
// dropped, so the next Apply fetches a new one.
func (o *OAuth2) Rejected(req *http.Request) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.token != "" && req.Header.Get("Authorization") == "Bearer "+o.token {
		o.token = ""
	}
	return true
}

// Token returns a valid access token, fetching one when none is cached.
func (o *OAuth2) Token(ctx context.Context) (string, error) {
	for {
		o.mu.Lock()
		if o.token != "" && (o.expires.IsZero() || o.now().Before(o.expires)) {
			t := o.token
			o.mu.Unlock()
			return t, nil
		}
		wait := o.fetch
		if wait == nil {
			// Fetch in this goroutine; the others wait for it (or
			// for their context).
			wait = make(chan struct{})
			o.fetch = wait
			o.mu.Unlock()
			o.refresh(wait)
		} else {
			o.mu.Unlock()
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-wait:
			}
		}
		o.mu.Lock()
		err, ok := o.err, o.token != ""
		o.mu.Unlock()
		if !ok {
			return "", err
		}
	}
}

// refresh fetches a token and closes done.
func (o *OAuth2) refresh(done chan struct{}) {
	tok, life, err := o.request()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fetch, o.err = nil, err
	if err == nil {
		o.token, o.expires = tok, time.Time{}
		if life > 0 {
			o.expires = o.now().Add(life - min(o.cfg.Leeway, life/10))
		}
	}
	close(done)
}

func (o *OAuth2) request() (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.Timeout)
	defer cancel()
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(o.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(o.cfg.Scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("upstream: oauth2: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(o.cfg.ClientID), url.QueryEscape(o.cfg.ClientSecret))
	resp, err := o.cfg.HTTP.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("upstream: oauth2: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("upstream: oauth2: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("upstream: oauth2: token endpoint answered %s: %.200s", resp.Status, body)
	}
	var t struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return "", 0, fmt.Errorf("upstream: oauth2: token response: %w", err)
	}
	if t.AccessToken == "" || (t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer")) {
		return "", 0, fmt.Errorf("upstream: oauth2: token response without a bearer token")
	}
	return t.AccessToken, time.Duration(t.ExpiresIn) * time.Second, nil
}
