package sqldb

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable is what a query's error matches (errors.Is) when the
// database could not be reached, dropped the connection, is shutting
// down or starting, or has not been prepared yet (see Gate): a fault of
// the database, not of the query, worth trying again later. Callers
// answer it with a 503 and keep what they were writing.
var ErrUnavailable = errors.New("sqldb: database unavailable")

// IsUnavailable reports whether err means the database is unreachable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// downError is a driver error classified as unavailability: it matches
// ErrUnavailable and unwraps to the driver's error.
type downError struct{ err error }

func (e *downError) Error() string        { return "database unavailable: " + e.err.Error() }
func (e *downError) Unwrap() error        { return e.err }
func (e *downError) Is(target error) bool { return target == ErrUnavailable }

// classify wraps err in a downError when it says the database is out of
// reach; other errors (and nil) are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !unreachable(err) {
		return err
	}
	return &downError{err}
}

func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		// Class 08: connection exception; 57P01-57P03: admin shutdown,
		// crash shutdown, cannot connect now (starting up).
		return len(pe.Code) == 5 && pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	// pgconn's "conn closed" and the like: the request never reached
	// the server, which is what SafeToRetry says.
	return pgconn.SafeToRetry(err)
}

// downRows classifies the error of an iteration cut short by the
// connection.
type downRows struct{ Rows }

func (r downRows) Err() error { return classify(r.Rows.Err()) }

// IsBadData reports whether the database refused err's statement for
// what was in it rather than for its own state: a PostgreSQL data
// exception (class 22: a value out of range, a bad byte sequence), an
// integrity violation (23) or a program limit (54: an index row too
// large). Sending the same rows again fails the same way.
func IsBadData(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}
