package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/sqldb"
)

// Error is an API error: an HTTP status, a stable code and a message, sent
// as {"error":{"code":"..","message":".."}} (docs/design.md "JSON shapes").
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int
	// Err is the cause, for logs; never sent to the client.
	Err error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, "bad_request", format, args...)
}

func notFound(format string, args ...any) *Error {
	return errorf(http.StatusNotFound, "not_found", format, args...)
}

func conflict(format string, args ...any) *Error {
	return errorf(http.StatusConflict, "conflict", format, args...)
}

var errForbidden = &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "not allowed"}

func forbidden(format string, args ...any) *Error {
	return errorf(http.StatusForbidden, "forbidden", format, args...)
}

// toError maps any error to the API error the client gets. It is the one
// place that decides statuses for errors coming from the PBX and from auth.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *ami.ActionError
	var rl *auth.RateLimitError
	var mbe *http.MaxBytesError
	var un interface{ UnavailableCode() string } // packages rest does not import (bus.ErrStaleLease)
	switch {
	case errors.As(err, &ae):
		return &Error{Status: http.StatusBadGateway, Code: "pbx_error", Message: "the PBX refused " + ae.Action + ": " + ae.Message, Err: err}
	case errors.Is(err, ami.ErrNotConnected):
		return &Error{Status: http.StatusServiceUnavailable, Code: "pbx_down", Message: "the PBX link is down", Err: err}
	case errors.As(err, &un):
		return &Error{Status: http.StatusServiceUnavailable, Code: un.UnavailableCode(), Message: err.Error(), Err: err}
	case ami.IsTimeout(err):
		return &Error{Status: http.StatusGatewayTimeout, Code: "pbx_timeout", Message: "the PBX did not answer in time", Err: err}
	case errors.Is(err, ami.ErrConnectionLost):
		return &Error{Status: http.StatusBadGateway, Code: "pbx_connection_lost", Message: "the PBX link dropped before the answer; the action may or may not have happened", Err: err}
	case errors.Is(err, ami.ErrInjection):
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "CR, LF or NUL in a parameter", Err: err}
	case errors.As(err, &rl):
		return &Error{Status: http.StatusTooManyRequests, Code: "too_many_attempts", Message: rl.Error()[len("auth: "):], RetryAfter: rl.RetryAfterSeconds(), Err: err}
	case errors.Is(err, auth.ErrSessionsLoading):
		return &Error{Status: http.StatusServiceUnavailable, Code: "sessions_loading", Message: "sessions are being restored after a restart: try again", RetryAfter: 1, Err: err}
	case errors.Is(err, auth.ErrDirectoryUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: "directory_down", Message: "the user directory is unavailable: try again later", RetryAfter: 30, Err: err}
	case errors.Is(err, auth.ErrBadCredentials):
		return &Error{Status: http.StatusUnauthorized, Code: "bad_credentials", Message: "wrong user name or password", Err: err}
	case errors.Is(err, auth.ErrTokenExpired):
		return &Error{Status: http.StatusUnauthorized, Code: "token_expired", Message: "the token has expired: log in again", Err: err}
	case errors.Is(err, auth.ErrTokenUnknown):
		return &Error{Status: http.StatusUnauthorized, Code: "bad_token", Message: "unknown or revoked token", Err: err}
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "request body larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes", Err: err}
	case sqldb.IsUnavailable(err):
		return errStoreDown(err)
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Err: err}
}

// errStoreDown: the phonebook and history database is out of reach (not
// started, not migrated yet, or down); the live state is not affected.
func errStoreDown(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable", RetryAfter: 5, Err: err,
		Message: "the phonebook and call history database is unavailable; live calls are not affected; try again shortly"}
}

var (
	hdrJSON        = []string{"application/json"}
	hdrNoStore     = []string{"no-store"}
	hdrBearerChall = []string{`Bearer realm="ctibridge"`}
)

// writeError sends err as the error JSON and returns the status. 5xx
// causes are logged here, once.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) int {
	e := toError(err)
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Cache-Control"] = hdrNoStore
	delete(h, "Etag")
	delete(h, "Content-Encoding")
	delete(h, "Content-Length")
	if e.Status == http.StatusUnauthorized {
		h["Www-Authenticate"] = hdrBearerChall
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	// A database outage is logged where it is watched (sqldb.Gate),
	// once, not here for every request it fails.
	if e.Status >= 500 && log != nil && !sqldb.IsUnavailable(e.Err) {
		log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "err", e.Err)
	}
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{Error: struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message}})
	w.Write(append(b, '\n'))
	return e.Status
}

// writeJSON encodes v (for small, rare answers: login, /user/me, actions).
func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return writeError(w, nil, nil, err)
	}
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Cache-Control"] = hdrNoStore
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
	return status
}
