package sqldb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/sqldb"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// syncBuf is a log sink safe for the gate's goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGateOutage starts a Gate on a real PostgreSQL that is down: its
// Conn answers ErrUnavailable, Prepare is retried; the server starts, the
// gate prepares it once and passes queries through; the server stops
// again: queries fail with ErrUnavailable (not some other error), Up
// turns false, and the outage is logged once, then its end.
func TestGateOutage(t *testing.T) {
	cluster, dsn := dbtest.NewCluster(t)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := sqldb.Pgx(pool)
	var prepared, onReady int
	var logs syncBuf
	g := sqldb.NewGate(c, sqldb.GateConfig{
		Prepare: func(ctx context.Context) error {
			if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS gate_probe (n int)`); err != nil {
				return err
			}
			prepared++
			return nil
		},
		OnReady:    func(context.Context) { onReady++ },
		CheckEvery: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	gc := g.Conn()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { g.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	if _, err := gc.Exec(ctx, `SELECT 1`); !sqldb.IsUnavailable(err) {
		t.Fatalf("before the database is up: %v, want ErrUnavailable", err)
	}
	time.Sleep(300 * time.Millisecond) // several failed attempts
	if g.Ready() || g.Up() {
		t.Fatal("ready while the server is down")
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, "the gate to prepare the database", g.Up)
	if _, err := gc.Exec(ctx, `INSERT INTO gate_probe VALUES (1)`); err != nil {
		t.Fatalf("once up: %v", err)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = gc.Exec(ctx, `INSERT INTO gate_probe VALUES (2)`)
	if !sqldb.IsUnavailable(err) {
		t.Fatalf("after the server stopped: %v, want ErrUnavailable", err)
	}
	dbtest.WaitFor(t, "Up to turn false", func() bool { return !g.Up() })
	// Known down: answered at once, without trying the server.
	if _, err := gc.Exec(ctx, `SELECT 1`); !sqldb.IsUnavailable(err) || !strings.Contains(err.Error(), "checking again") {
		t.Fatalf("while known down: %v", err)
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, "the gate to see the database back", g.Up)
	if prepared != 1 || onReady != 1 {
		t.Errorf("Prepare ran %d times, OnReady %d, want once each", prepared, onReady)
	}
	// A query error is not an outage.
	if _, err := gc.Exec(ctx, `SELECT nosuchcolumn FROM gate_probe`); err == nil || sqldb.IsUnavailable(err) {
		t.Errorf("bad query: %v, want a plain error", err)
	}
	l := logs.String()
	if n := strings.Count(l, `msg="database unavailable"`); n != 2 {
		t.Errorf("%d outage lines for two outages (first failure only):\n%s", n, l)
	}
	if n := strings.Count(l, `msg="database back"`); n != 2 {
		t.Errorf("%d recovery lines, want 2:\n%s", n, l)
	}
}

// TestUnavailableRefused: a port nothing listens on is an outage.
func TestUnavailableRefused(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = sqldb.Pgx(pool).Exec(context.Background(), `SELECT 1`)
	if !sqldb.IsUnavailable(err) || !errors.Is(err, sqldb.ErrUnavailable) {
		t.Fatalf("%v: want ErrUnavailable", err)
	}
}

func TestBackoff(t *testing.T) {
	b := sqldb.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for i, max := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := b.Next()
		if d < max*time.Millisecond/2 || d > max*time.Millisecond {
			t.Fatalf("pause %d: %v, want within [%v, %v]", i, d, max*time.Millisecond/2, max*time.Millisecond)
		}
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
}

// TestOutageLog: the first failure is logged with its error, the next
// ones only as a count once a minute, and the end once, with the total.
func TestOutageLog(t *testing.T) {
	var logs syncBuf
	o := sqldb.NewOutage(slog.New(slog.NewTextHandler(&logs, nil)), "cdr database")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sqldb.SetOutageClock(o, func() time.Time { return now })
	o.OK() // no outage: nothing to say
	for range 100 {
		o.Fail(errors.New("connection refused"))
		now = now.Add(100 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 100 failures within 10 s, want 1:\n%s", n, logs.String())
	}
	now = now.Add(time.Minute)
	o.Fail(errors.New("connection refused"))
	if !o.Down() {
		t.Fatal("not down")
	}
	o.OK()
	o.OK()
	l := logs.String()
	for _, want := range []string{
		`level=WARN msg="cdr database unavailable" err="connection refused"`,
		`level=WARN msg="cdr database still unavailable" failures=100 down_for=1m10s`,
		`level=INFO msg="cdr database back" failures=101 down_for=1m10s`,
	} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %s:\n%s", want, l)
		}
	}
	if n := strings.Count(l, "\n"); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, l)
	}
}
