package ami

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// ProbeFailure says why a Probe failed.
type ProbeFailure uint8

const (
	ProbeRefused    ProbeFailure = iota + 1 // nothing listens (connection refused) or the dial failed otherwise
	ProbeTimeout                            // the connect, banner or login did not answer before the deadline
	ProbeAuthFailed                         // the manager answered Login with Response: Error
	ProbeNotAMI                             // the peer speaks something else (no "Asterisk Call Manager" banner, or no AMI frames)
)

func (f ProbeFailure) String() string {
	switch f {
	case ProbeRefused:
		return "refused"
	case ProbeTimeout:
		return "timeout"
	case ProbeAuthFailed:
		return "auth failed"
	case ProbeNotAMI:
		return "not AMI"
	}
	return "unknown"
}

// ProbeError is Probe's error: what failed, at which address, and the
// underlying error.
type ProbeError struct {
	Addr    string
	Failure ProbeFailure
	Err     error
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("ami probe %s: %v: %v", e.Addr, e.Failure, e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// Probe checks that cfg would log in: it connects (TLS when cfg.TLS is
// set), reads the banner, logs in with cfg's credentials exactly as a
// Client does (the same login code, MD5 included), and logs off. ctx
// bounds the whole exchange, and so do cfg.DialTimeout and
// cfg.ActionTimeout. A failure is a *ProbeError.
func Probe(ctx context.Context, cfg Config) error {
	cfg.Events = "off" // nothing to read but the answers
	cfg.PingInterval = -1
	c := NewClient(cfg)
	fail := func(f ProbeFailure, err error) error {
		return &ProbeError{Addr: c.cfg.Addr, Failure: f, Err: err}
	}
	nc, err := c.dial(ctx)
	if err != nil {
		if IsTimeout(err) || ctx.Err() != nil {
			return fail(ProbeTimeout, err)
		}
		return fail(ProbeRefused, err)
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	r := NewReader(bufio.NewReaderSize(nc, 4<<10), c.cfg.Reader)
	cn := &conn{nc: nc, bw: bufio.NewWriterSize(nc, 1<<10)}
	_, err = c.login(cn, r) // the Client's own: no credentials to a peer that is not a manager
	var ae *ActionError
	switch {
	case errors.As(err, &ae):
		return fail(ProbeAuthFailed, err)
	case err != nil && (IsTimeout(err) || ctx.Err() != nil):
		return fail(ProbeTimeout, err)
	case err != nil && (errors.Is(err, ErrNotManager) || errors.Is(err, ErrProtocol) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return fail(ProbeNotAMI, err) // not a manager, or hung up on Login
	case err != nil:
		return fail(ProbeRefused, err)
	}
	// Logged in; a Logoff that goes unanswered is no failure of the login.
	c.exchange(cn, r, NewAction(ActionLogoff))
	return nil
}
