package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config configures a Client. URLs is required; the zero value of every
// other field means its default.
type Config struct {
	// URLs are the base URLs of the servers of one service
	// ("https://pb1.example.com/api"); a request's path is appended.
	URLs []string
	// MaxConnsPerHost bounds the connections to each server (in use and
	// idle). Default 16.
	MaxConnsPerHost int
	// Timeout bounds each attempt's wait for the response headers
	// (connecting included). Default 5 s.
	Timeout time.Duration
	// ReadTimeout bounds the wait for each read of a response body.
	// Default 10 s.
	ReadTimeout time.Duration
	// Retries is how many more attempts an idempotent request gets after
	// a failure. Default 2; negative: none.
	Retries int
	// Backoff is the first retry's maximum wait; it doubles per retry up
	// to 1 s, and the wait is random in [0, max) (full jitter). Default
	// 50 ms.
	Backoff time.Duration
	// EjectAfter consecutive failures eject a server for EjectFor.
	// Defaults 3 and 10 s.
	EjectAfter int
	EjectFor   time.Duration
	// Credentials, when set, authenticate every attempt.
	Credentials Credentials
	// Transport replaces the pooled *http.Transport (tests). Its
	// connection limits are then its own.
	Transport http.RoundTripper
	// Log receives ejections and re-admissions. Default: discard.
	Log *slog.Logger
}

// Credentials authenticate requests.
type Credentials interface {
	// Apply adds credentials to an attempt.
	Apply(req *http.Request) error
	// Rejected says the server answered 401 to credentials Apply added.
	// It reports whether new credentials may now be applied (then the
	// request is sent once more).
	Rejected(req *http.Request) bool
}

// backend is one server.
type backend struct {
	base *url.URL

	// Guarded by Client.mu.
	outstanding  int
	failures     int // in a row
	ejectedUntil time.Time
}

// Client sends requests to the servers of one service.
type Client struct {
	// Immutable after New.
	cfg  Config
	log  *slog.Logger
	http *http.Client
	tr   *http.Transport // nil when Config.Transport was given
	now  func() time.Time

	mu       sync.Mutex // guards the backends' mutable fields
	backends []*backend
}

// New returns a Client for cfg.URLs.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("upstream: no URL")
	}
	if cfg.MaxConnsPerHost <= 0 {
		cfg.MaxConnsPerHost = 16
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.EjectAfter <= 0 {
		cfg.EjectAfter = 3
	}
	if cfg.EjectFor <= 0 {
		cfg.EjectFor = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, log: log.With("component", "upstream"), now: time.Now}
	for _, s := range cfg.URLs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("upstream: %q is not an http(s) URL", s)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = ""
		c.backends = append(c.backends, &backend{base: u})
	}
	rt := cfg.Transport
	if rt == nil {
		c.tr = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxConnsPerHost:       cfg.MaxConnsPerHost,
			MaxIdleConnsPerHost:   cfg.MaxConnsPerHost,
			MaxIdleConns:          cfg.MaxConnsPerHost * len(c.backends),
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.Timeout,
			ExpectContinueTimeout: time.Second,
		}
		rt = c.tr
	}
	c.http = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// Close closes idle connections. The Client still works afterwards.
func (c *Client) Close() {
	if c.tr != nil {
		c.tr.CloseIdleConnections()
	}
}

// Stat is a server's state, for tests and diagnostics.
type Stat struct {
	URL         string
	Outstanding int
	Failures    int  // in a row
	Ejected     bool // left out of the rotation now
}

// Stats returns the state of every server, in Config.URLs order.
func (c *Client) Stats() []Stat {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	out := make([]Stat, len(c.backends))
	for i, b := range c.backends {
		out[i] = Stat{URL: b.base.String(), Outstanding: b.outstanding, Failures: b.failures, Ejected: now.Before(b.ejectedUntil)}
	}
	return out
}

// pick chooses the server with the fewest outstanding requests among
// those not ejected (and not in avoid, unless nothing else is left);
// when all are ejected, the one whose ejection ends first. It counts
// the request as outstanding.
func (c *Client) pick(avoid *backend) *backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var best, soonest *backend
	for pass := 0; pass < 2 && best == nil; pass++ {
		for _, b := range c.backends {
			if now.Before(b.ejectedUntil) {
				if soonest == nil || b.ejectedUntil.Before(soonest.ejectedUntil) {
					soonest = b
				}
				continue
			}
			if pass == 0 && b == avoid && len(c.backends) > 1 {
				continue
			}
			if best == nil || b.outstanding < best.outstanding {
				best = b
			}
		}
	}
	if best == nil {
		best = soonest
	}
	best.outstanding++
	return best
}

// done records the end of a request to b (its body closed, or no
// response), and whether it failed.
func (c *Client) done(b *backend, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b.outstanding--
	if !failed {
		if b.failures >= c.cfg.EjectAfter {
			c.log.Info("upstream re-admitted", "url", b.base.String())
		}
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= c.cfg.EjectAfter {
		b.ejectedUntil = c.now().Add(c.cfg.EjectFor)
		if b.failures == c.cfg.EjectAfter {
			c.log.Warn("upstream ejected", "url", b.base.String(), "for", c.cfg.EjectFor)
		}
	}
}

// Idempotent reports whether a request may be sent again after a
// failure: its method is idempotent (RFC 9110 section 9.2.2) and its body,
// if any, can be replayed.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// failedStatus reports whether a status means the server, not the
// request, failed: a gateway or overload answer.
func failedStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// Do sends req, whose URL holds a path and query only, to one of the
// servers, retrying as the package documentation says. The caller must
// close the response body. A 502, 503 or 504 still answering the last
// attempt is returned as a response, not an error.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if req.URL.IsAbs() || req.URL.Host != "" {
		return nil, fmt.Errorf("upstream: %s: want a path, not an absolute URL", req.URL)
	}
	ctx := req.Context()
	attempts := 1
	if Idempotent(req) && c.cfg.Retries > 0 {
		attempts += c.cfg.Retries
	}
	renewed := false
	var last *backend
	var lastErr error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			if err := c.sleep(ctx, i); err != nil {
				return nil, fmt.Errorf("upstream: %s %s: %w (after %w)", req.Method, req.URL.Path, err, lastErr)
			}
		}
		b := c.pick(last)
		last = b
		resp, err := c.attempt(ctx, b, req, i > 0 || renewed)
		if err == nil && resp.StatusCode == http.StatusUnauthorized && c.cfg.Credentials != nil && !renewed {
			renewed = true
			if c.cfg.Credentials.Rejected(resp.Request) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) {
				// Refused before acting: send once more with new
				// credentials, whatever the method.
				resp.Body.Close()
				i--
				continue
			}
		}
		switch {
		case err != nil:
			lastErr = err
			if ctx.Err() != nil {
				return nil, fmt.Errorf("upstream: %s %s: %w", req.Method, req.URL.Path, err)
			}
		case failedStatus(resp.StatusCode) && i+1 < attempts:
			lastErr = fmt.Errorf("%s answered %s", b.base.Host, resp.Status)
			resp.Body.Close()
		default:
			return resp, nil
		}
	}
	return nil, fmt.Errorf("upstream: %s %s: %w", req.Method, req.URL.Path, lastErr)
}

// sleep waits before retry i (1, 2, ...): random in [0, Backoff<<(i-1)),
// at most 1 s.
func (c *Client) sleep(ctx context.Context, i int) error {
	return SleepBackoff(ctx, c.cfg.Backoff, time.Second, i)
}

// SleepBackoff waits before retry number n (1, 2, ...): a random time up
// to base doubled n-1 times, at most limit (full jitter), or until ctx
// ends (its error).
func SleepBackoff(ctx context.Context, base, limit time.Duration, n int) error {
	if n < 1 {
		n = 1
	}
	if n <= 30 && base<<(n-1) > 0 {
		limit = min(base<<(n-1), limit)
	}
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt sends req to b once. The request counts as outstanding on b
// until the returned body is closed.
func (c *Client) attempt(ctx context.Context, b *backend, req *http.Request, again bool) (*http.Response, error) {
	actx, cancel := context.WithCancel(ctx)
	out := req.Clone(actx)
	u := *b.base
	u.Path = b.base.Path + req.URL.Path
	if req.URL.RawPath != "" {
		u.RawPath = b.base.EscapedPath() + req.URL.RawPath
	}
	u.RawQuery = req.URL.RawQuery
	out.URL = &u
	out.Host = ""
	if again && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			cancel()
			c.done(b, false)
			return nil, err
		}
		out.Body = body
	}
	if c.cfg.Credentials != nil {
		if err := c.cfg.Credentials.Apply(out); err != nil {
			cancel()
			c.done(b, false)
			return nil, fmt.Errorf("credentials: %w", err)
		}
	}
	// The timer bounds the wait for headers; then the body's reads.
	timer := time.AfterFunc(c.cfg.Timeout, cancel)
	resp, err := c.http.Do(out)
	if err != nil {
		timer.Stop()
		cancel()
		c.done(b, true)
		return nil, err
	}
	failed := failedStatus(resp.StatusCode)
	timer.Reset(c.cfg.ReadTimeout)
	resp.Body = &body{rc: resp.Body, timer: timer, timeout: c.cfg.ReadTimeout, release: func(readErr bool) {
		timer.Stop()
		cancel()
		c.done(b, failed || readErr)
	}}
	return resp, nil
}

// body counts the response as outstanding until closed and cuts a read
// that waits longer than timeout.
type body struct {
	rc      io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	once    sync.Once
	release func(failed bool)
	failed  bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.timer.Reset(b.timeout)
	if err != nil && err != io.EOF {
		b.failed = true
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.once.Do(func() { b.release(b.failed) })
	return err
}
