package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/auth/authdb"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/sqldb"
)

// migrate applies the phonebook, history, sessions and nethcti
// migrations to d and returns a line per component for logs.
func migrate(ctx context.Context, d *sqldb.DB) ([]string, error) {
	var out []string
	for _, c := range []struct {
		name string
		pg   func(context.Context, *pgxpool.Pool) ([]int, error)
		lite func(context.Context, *sql.DB) ([]int, error)
	}{
		{"phonebook", phonebook.Schema.MigratePostgres, phonebook.Schema.MigrateSQLite},
		{"history", history.Schema.MigratePostgres, history.Schema.MigrateSQLite},
		{"sessions", authdb.Schema.MigratePostgres, authdb.Schema.MigrateSQLite},
		{"nethcti", nethcti.Schema.MigratePostgres, nethcti.Schema.MigrateSQLite},
	} {
		var v []int
		var err error
		if d.Pool != nil {
			v, err = c.pg(ctx, d.Pool)
		} else {
			v, err = c.lite(ctx, d.SQL)
		}
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%s: applied %v", c.name, v))
	}
	return out, nil
}

// runMigrate is `ctibridge migrate [--db DSN] [--data-dir DIR]`: it
// applies the embedded schema migrations and exits. serve applies them at
// start too; this is for deployments that migrate as a separate step.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var dsn, dataDir string
	s := &settings{}
	s.Str(&dataDir, "data-dir", "./ctibridge-data", "data directory (for the default embedded database)")
	s.Str(&dsn, "db", "", "database: postgres://... or sqlite:PATH (default sqlite:<data-dir>/ctibridge.db)")
	if err := s.Parse("migrate", args, getenv, stderr); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn, dataDir)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	lines, err := migrate(ctx, db)
	for _, l := range lines {
		fmt.Fprintf(stderr, "migrate: %s: %s\n", db.Desc, l)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
