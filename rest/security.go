package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Security headers of every answer (SecureHeaders). The API answers JSON
// and YAML, never a page: its Content-Security-Policy allows nothing, and
// the panel's handler replaces it with its own (strict, same-origin only).
var (
	hdrNoSniff     = []string{"nosniff"}
	hdrNoReferrer  = []string{"no-referrer"}
	hdrFrameDeny   = []string{"DENY"}
	hdrAPICSP      = []string{"default-src 'none'; frame-ancestors 'none'"}
	hdrHSTS        = []string{"max-age=31536000"}
	allowAnyOrigin = "*"
)

// SecureHeaders wraps h (the whole listener: panel, /ws and the API) so
// every answer carries X-Content-Type-Options: nosniff, Referrer-Policy:
// no-referrer, X-Frame-Options: DENY and a Content-Security-Policy that
// forbids everything including framing (frame-ancestors 'none'), which a
// handler may replace with its own (the panel does). Over TLS it adds
// Strict-Transport-Security (one year); behind a TLS-terminating proxy the
// proxy is the one to send it. It does not allocate.
func SecureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["X-Content-Type-Options"] = hdrNoSniff
		hd["Referrer-Policy"] = hdrNoReferrer
		hd["X-Frame-Options"] = hdrFrameDeny
		hd["Content-Security-Policy"] = hdrAPICSP
		if r.TLS != nil {
			hd["Strict-Transport-Security"] = hdrHSTS
		}
		h.ServeHTTP(w, r)
	})
}

// CheckOrigin returns the WebSocket upgrade's Origin check (ws.Config's
// CheckOrigin) for a list of allowed origins ("https://cti.example.com",
// scheme and host[:port]; "*" allows any). Whatever the list, a request
// without Origin (a native client: softphone, script) and a request from
// the same origin (the Origin's host equals the request's Host: the panel
// served by ctibridge itself, also behind a proxy that keeps Host) are
// allowed; everything else is refused (403 at the upgrade), so a page on
// another site holding a stolen token cannot open the stream from a
// browser.
func CheckOrigin(allowed []string) (func(*http.Request) bool, error) {
	set := map[string]bool{}
	for _, o := range allowed {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o != allowAnyOrigin {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return nil, fmt.Errorf("rest: ws origins: %q: want scheme://host[:port] like https://cti.example.com, or *", o)
			}
			o = u.Scheme + "://" + u.Host
		}
		set[strings.ToLower(o)] = true
	}
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" || set[allowAnyOrigin] || set[strings.ToLower(origin)] {
			return true
		}
		u, err := url.Parse(origin)
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
	}, nil
}
