package loadtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// RootOf is the scheme and host of u ("http://127.0.0.1:8080"), with ws
// and wss mapped to http and https; u itself when it does not parse.
func RootOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	scheme := map[string]string{"ws": "http", "wss": "https"}[p.Scheme]
	if scheme == "" {
		scheme = p.Scheme
	}
	return scheme + "://" + p.Host
}

func httpClient(insecure bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	return &http.Client{Transport: tr, Timeout: clientTimeout}
}

// clientTimeout bounds each request of httpClient's clients (a variable
// for the tests).
var clientTimeout = 10 * time.Second

// Login posts {"username","password"} to base/auth/login and returns the
// token ctibridge answers with.
func Login(ctx context.Context, base, user, password string, insecure bool) (string, error) {
	body, _ := json.Marshal(map[string]string{"username": user, "password": password})
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(base, "/")+"/auth/login", bytes.NewReader(body))
	if err != nil {
		return "", kindError{ErrBadURL, fmt.Sprintf("loadtest: login: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	// A login that times out is tried twice more: a race-built serve just
	// ready on a loaded machine once took over the client's 10 s to answer
	// (the chaos suite at load 20). Any other failure is final.
	var res *http.Response
	for try := 1; ; try++ {
		req.Body, req.GetBody = io.NopCloser(bytes.NewReader(body)), nil
		if res, err = httpClient(insecure).Do(req); err == nil {
			break
		}
		var ne net.Error
		if try == 3 || ctx.Err() != nil || !errors.As(err, &ne) || !ne.Timeout() {
			return "", fmt.Errorf("loadtest: login: %w", err)
		}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != 200 {
		return "", kindError{ErrAuth, fmt.Sprintf("loadtest: login as %s: HTTP %d: %s", user, res.StatusCode, trunc(b))}
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
		return "", kindError{ErrAuth, fmt.Sprintf("loadtest: login as %s: no token in %s", user, trunc(b))}
	}
	return out.Token, nil
}
