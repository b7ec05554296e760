package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/upstream"
)

// The headers of a POST.
const (
	HeaderEvent     = "X-Ctibridge-Event"     // the event type
	HeaderID        = "Idempotency-Key"       // Event.ID
	HeaderTimestamp = "X-Ctibridge-Timestamp" // unix seconds of this attempt
	HeaderSignature = "X-Ctibridge-Signature" // "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body)
)

var errMemoryFull = errors.New("webhook: memory queue full (the disk is slower than the events)")

// Sign returns the signature header value of body sent at ts (unix
// seconds) with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	var b [20]byte
	m.Write(strconv.AppendInt(b[:0], ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header against body, ts (the timestamp
// header) and secret, and that ts is within tolerance of now: what a Go
// receiver does.
func Verify(secret, signature, ts string, body []byte, now time.Time, tolerance time.Duration) error {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: bad timestamp %q", ts)
	}
	if d := now.Sub(time.Unix(n, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: timestamp %s off by %s", ts, d.Round(time.Second))
	}
	if !hmac.Equal([]byte(signature), []byte(Sign(secret, n, body))) {
		return errors.New("webhook: bad signature")
	}
	return nil
}

// newClient builds the pooled client of one webhook and the request
// target to give it (the URL's query; the path is the client's base).
func newClient(cfg *Config, log *slog.Logger) (*upstream.Client, string, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, "", fmt.Errorf("webhook %s: %w", cfg.Name, err)
	}
	target := ""
	if u.RawQuery != "" {
		target = "?" + u.RawQuery
	}
	u.RawQuery, u.Fragment = "", ""
	var creds upstream.Credentials
	switch a := cfg.Auth; {
	case a.OAuth2 != nil:
		o, err := upstream.NewOAuth2(upstream.OAuth2Config{TokenURL: a.OAuth2.TokenURL, ClientID: a.OAuth2.ClientID,
			ClientSecret: a.OAuth2.ClientSecret, Scopes: a.OAuth2.Scopes})
		if err != nil {
			return nil, "", fmt.Errorf("webhook %s: %w", cfg.Name, err)
		}
		creds = o
	case a.Token != "":
		creds = upstream.StaticHeader("Authorization", "Bearer "+a.Token)
	}
	// POSTs are not retried by the client; deliver retries them, with
	// the event still in the queue.
	c, err := upstream.New(upstream.Config{URLs: []string{u.String()}, MaxConnsPerHost: 2, Timeout: cfg.Timeout,
		ReadTimeout: cfg.Timeout, Retries: -1, Credentials: creds, Log: log})
	if err != nil {
		return nil, "", fmt.Errorf("webhook %s: %w", cfg.Name, err)
	}
	return c, target, nil
}

// permanent reports whether a status refuses the event for good: a 4xx
// other than timeout, too early and too many requests. Retrying it would
// block the queue behind an event the receiver will never take.
func permanent(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout &&
		code != http.StatusTooEarly && code != http.StatusTooManyRequests
}

// deliver POSTs r until the receiver takes it (2xx) or refuses it for
// good, waiting between attempts with full jitter; it returns an error
// only when ctx ends first (r stays queued). Attempts run in pctx, which
// outlives ctx by a grace period: one under way when ctx ends may finish.
func (h *hook) deliver(ctx, pctx context.Context, r record) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := h.sleep(ctx, attempt); err != nil {
				return err
			}
		}
		code, err := h.post(pctx, r)
		switch {
		case err == nil && code >= 200 && code < 300:
			h.delivered.Add(1)
			h.receiver.OK()
			return nil
		case err == nil && permanent(code):
			h.dropped.Add(1)
			h.receiver.OK() // up, but refusing this one
			h.log.Error("webhook event refused by the receiver: dropped", "id", r.ID, "status", code)
			return nil
		case err == nil:
			err = fmt.Errorf("receiver answered %d", code)
		}
		h.failed.Add(1)
		h.receiver.Fail(err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// sleep waits before attempt n (1, 2, ...): random in [0, 250ms<<(n-1)),
// at most Config.RetryMax.
func (h *hook) sleep(ctx context.Context, n int) error {
	return upstream.SleepBackoff(ctx, 250*time.Millisecond, h.cfg.RetryMax, n)
}

// post sends r once and returns the status. The attempt also ends by
// itself (Config.Timeout).
func (h *hook) post(ctx context.Context, r record) (int, error) {
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.target, bytes.NewReader(r.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ctibridge-webhook")
	req.Header.Set(HeaderEvent, r.Type)
	req.Header.Set(HeaderID, r.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(h.cfg.Secret, ts, r.Body))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}
