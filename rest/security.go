package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Security headers. Every answer says nosniff (a browser must not read
// JSON as a script or a page) and, over TLS, HSTS (SecureHeaders). The
// headers that only a document rendered by a browser heeds (a policy of
// what it may load, framing, the referrer it sends) go on the answers that
// can be one: the panel sets its own, the relayed customer card these
// (DocumentHeaders). A JSON answer carries neither: each header costs every
// request its clone, sort and write in net/http.
var (
	hdrNoSniff     = []string{"nosniff"}
	hdrNoReferrer  = []string{"no-referrer"}
	hdrFrameDeny   = []string{"DENY"}
	hdrDocCSP      = []string{"default-src 'none'; frame-ancestors 'none'"}
	hdrHSTS        = []string{"max-age=31536000"}
	allowAnyOrigin = "*"
)

// SecureHeaders wraps h (the whole listener: panel, /ws and the API) so
// every answer carries X-Content-Type-Options: nosniff and, over TLS,
// Strict-Transport-Security (one year); behind a TLS-terminating proxy
// the proxy is the one to send it. It does not allocate.
func SecureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["X-Content-Type-Options"] = hdrNoSniff
		if r.TLS != nil {
			hd["Strict-Transport-Security"] = hdrHSTS
		}
		h.ServeHTTP(w, r)
	})
}

// DocumentHeaders sets on hd what an answer a browser may render as a
// document carries: a Content-Security-Policy that forbids everything
// including framing, X-Frame-Options: DENY (older browsers) and
// Referrer-Policy: no-referrer. A handler with its own policy (the panel)
// sets its own instead.
func DocumentHeaders(hd http.Header) {
	hd["Content-Security-Policy"] = hdrDocCSP
	hd["X-Frame-Options"] = hdrFrameDeny
	hd["Referrer-Policy"] = hdrNoReferrer
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
