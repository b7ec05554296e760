package loadtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// Error kinds, the keys of Report.Errors.
const (
	ErrRefused     = "connection_refused" // nothing listens at the address
	ErrReset       = "connection_reset"   // the peer reset the connection
	ErrClosed      = "connection_closed"  // EOF before a whole response
	ErrTimeout     = "timeout"            // no (whole) response within the timeout
	ErrDNS         = "dns"                // the host name did not resolve
	ErrTLS         = "tls"                // handshake or certificate failure
	ErrBadResponse = "bad_response"       // not HTTP/1.x, or a malformed one
	ErrBadURL      = "bad_url"            // the URL cannot be used
	ErrNotJSON     = "non_json_frame"     // a WebSocket text frame that is not JSON
	ErrBinary      = "binary_frame"       // a WebSocket binary frame (the protocol has none)
	ErrHandshake   = "ws_handshake"       // the WebSocket upgrade was refused
	ErrAuth        = "auth"               // login refused or the server closed with 4001-4003
	ErrSeqBack     = "seq_backwards"      // an event's seq was lower than one already seen
	ErrOther       = "other"
)

// Kind classifies a network or protocol error into one of the Err* kinds.
func Kind(err error) string {
	var (
		dns   *net.DNSError
		rec   tls.RecordHeaderError
		alert tls.AlertError
		cv    *tls.CertificateVerificationError
		ua    x509.UnknownAuthorityError
		hn    x509.HostnameError
		ci    x509.CertificateInvalidError
		ne    net.Error
		ke    kindError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ke):
		return ke.kind
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ErrReset
	case errors.As(err, &dns):
		return ErrDNS
	case errors.As(err, &rec), errors.As(err, &alert), errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return ErrTLS
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ErrClosed
	case errors.As(err, &ne) && ne.Timeout():
		return ErrTimeout
	}
	return ErrOther
}

// kindError is an error of a known kind.
type kindError struct {
	kind string
	msg  string
}

func (e kindError) Error() string { return e.msg }

// errorCounts counts errors by kind and keeps the first message of each.
type errorCounts struct {
	mu    sync.Mutex
	n     map[string]uint64
	first map[string]string
}

func (c *errorCounts) add(err error) { c.addKind(Kind(err), err.Error()) }

func (c *errorCounts) addKind(kind, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.first = map[string]uint64{}, map[string]string{}
	}
	c.n[kind]++
	if _, ok := c.first[kind]; !ok {
		c.first[kind] = msg
	}
}

func (c *errorCounts) snapshot() (map[string]uint64, map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, f := make(map[string]uint64, len(c.n)), make(map[string]string, len(c.first))
	for k, v := range c.n {
		n[k] = v
	}
	for k, v := range c.first {
		f[k] = v
	}
	return n, f
}

func (c *errorCounts) total() (t uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.n {
		t += v
	}
	return t
}
