package authdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/sqldb"
)

// The Store is the shared session table of the nodes on one PostgreSQL
// (auth.Config.Shared).
var _ auth.SharedSessions = (*Store)(nil)

// notifyChannel is where the auth_sessions trigger announces changes
// (migration 002).
const notifyChannel = "ctibridge_sessions"

// failChannel is where nodes announce failed logins (auth's
// NoteFailures): "<schema> <node> <user name>".
const failChannel = "ctibridge_login_failures"

// ListenerName is the application_name of the listening connection (in
// pg_stat_activity).
const ListenerName = "ctibridge sessions listener"

// pingEvery is how long the listening connection may stay silent before
// it is checked with a query: a link cut without a reset is found within
// pingEvery plus pingTimeout.
const (
	pingEvery   = time.Second
	pingTimeout = 2 * time.Second
)

// errMalformed: a row whose hashes are not 64 hex digits.
var errMalformed = errors.New("malformed hash")

const sessionCols = `id, username, access_hash, refresh_hash, created_ns, expires_ns, refresh_expires_ns, client_addr`

func scanSession(scan func(dest ...any) error) (auth.SessionRecord, error) {
	var r auth.SessionRecord
	var ah, rh string
	var c, e, re int64
	if err := scan(&r.ID, &r.Username, &ah, &rh, &c, &e, &re, &r.ClientAddr); err != nil {
		return r, err
	}
	var err1, err2 error
	r.AccessHash, err1 = parseHash(ah)
	r.RefreshHash, err2 = parseHash(rh)
	if err1 != nil || err2 != nil || ah == "" {
		return r, fmt.Errorf("session %q: %w", r.ID, errMalformed)
	}
	r.Created, r.Expires, r.RefreshExp = fromNS(c), fromNS(e), fromNS(re)
	return r, nil
}

func (s *Store) one(ctx context.Context, where string, arg any) (auth.SessionRecord, bool, error) {
	r, err := scanSession(s.c.QueryRow(ctx, `SELECT `+sessionCols+` FROM auth_sessions WHERE `+where+` = $1`, arg))
	if errors.Is(err, sqldb.ErrNoRows) {
		return auth.SessionRecord{}, false, nil
	}
	if err != nil {
		return auth.SessionRecord{}, false, fmt.Errorf("authdb: find: %w", err)
	}
	return r, true, nil
}

// FindSession implements auth.SharedSessions.
func (s *Store) FindSession(ctx context.Context, h [32]byte, refresh bool) (auth.SessionRecord, bool, error) {
	if h == ([32]byte{}) {
		return auth.SessionRecord{}, false, nil
	}
	if refresh {
		return s.one(ctx, "refresh_hash", hexOf(h))
	}
	return s.one(ctx, "access_hash", hexOf(h))
}

// SessionByID implements auth.SharedSessions.
func (s *Store) SessionByID(ctx context.Context, id string) (auth.SessionRecord, bool, error) {
	return s.one(ctx, "id", id)
}

// SpendRefresh implements auth.SharedSessions: one UPDATE, so of two
// nodes spending one refresh token at once one wins.
func (s *Store) SpendRefresh(ctx context.Context, id string, h [32]byte) (bool, error) {
	n, err := s.c.Exec(ctx, `UPDATE auth_sessions SET refresh_hash = '', refresh_expires_ns = 0 WHERE id = $1 AND refresh_hash = $2`, id, hexOf(h))
	if err != nil {
		return false, fmt.Errorf("authdb: spend refresh: %w", err)
	}
	return n == 1, nil
}

// NoteFailures implements auth.SharedSessions: one NOTIFY per name, in
// one statement.
func (s *Store) NoteFailures(ctx context.Context, from string, usernames []string) error {
	if len(usernames) == 0 {
		return nil
	}
	_, err := s.c.Exec(ctx, `SELECT pg_notify($1, current_schema() || ' ' || $2 || ' ' || u) FROM unnest($3::text[]) AS u`, failChannel, from, usernames)
	if err != nil {
		return fmt.Errorf("authdb: note failures: %w", err)
	}
	return nil
}

// WatchSessions implements auth.SharedSessions with LISTEN on a
// connection of its own (PostgreSQL only), checked with a query after
// every pingEvery of silence. Changes of other schemas on the same
// database (other deployments, tests) are ignored.
func (s *Store) WatchSessions(ctx context.Context, ready func() error, changed func(id string, gone bool), failed func(from, username string)) error {
	pool := sqldb.Pool(s.c)
	if pool == nil {
		return errors.New("authdb: sessions are shared only on PostgreSQL")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerName
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("authdb: listen: %w", err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("authdb: listen: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel+`; LISTEN `+failChannel); err != nil {
		return fmt.Errorf("authdb: listen: %w", err)
	}
	if err := ready(); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			sch, rest, ok1 := strings.Cut(n.Payload, " ")
			a, b, ok2 := strings.Cut(rest, " ")
			switch {
			case !ok1 || !ok2 || sch != schema:
			case n.Channel == failChannel:
				failed(a, b)
			case a == "+" || a == "-":
				changed(b, a == "-")
			}
		case errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			_, err := conn.Exec(pctx, `SELECT 1`)
			cancel()
			if err != nil {
				return fmt.Errorf("authdb: listen: ping: %w", err)
			}
		default:
			return fmt.Errorf("authdb: listen: %w", err)
		}
	}
}
