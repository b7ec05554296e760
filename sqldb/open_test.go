package sqldb_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/sqldb"
)

// TestOpen: "" opens the embedded database in the data directory, which
// answers queries; a DSN of another kind is refused with its password
// left out of the error.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := sqldb.Open(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if want := "sqlite " + filepath.Join(dir, "ctibridge.db"); db.Desc != want || db.SQL == nil || db.Pool != nil {
		t.Errorf("opened %q (sql %v, pool %v), want %q", db.Desc, db.SQL != nil, db.Pool != nil, want)
	}
	var one int
	if err := db.SQL.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1: %d, %v", one, err)
	}
	_, err = sqldb.Open(context.Background(), "mysql://me:secret@host/db", dir)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "want postgres://") {
		t.Errorf("a mysql DSN: %v", err)
	}
}
