package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestThrowawayCluster exercises the last-resort path (initdb + pg_ctl)
// even when a server is running, so it does not rot: start, query, stop,
// start again.
func TestThrowawayCluster(t *testing.T) {
	c, dsn := NewCluster(t)
	query := func() {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT 41+1").Scan(&n); err != nil || n != 42 {
			t.Fatalf("query: %d %v", n, err)
		}
	}
	query()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := ping(dsn); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	query()
}

func TestSchemaIsFresh(t *testing.T) {
	dsn := Postgres(t)
	t.Logf("server: %s", Describe())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (a int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM x").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { Main(m) }
