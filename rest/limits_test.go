package rest

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/ctibridge/ctibridge/upstream"
)

// TestOversizedBodies: every route that reads a body answers 413 (not
// 400) when the body passes its limit, whatever is in it.
func TestOversizedBodies(t *testing.T) {
	f := storeFixture(t)
	big := `{"name":"` + strings.Repeat("x", MaxBody) + `"}`
	for _, tc := range []struct{ path, user, body string }{
		{"/auth/login", "", big},
		{"/astproxy/call", "alice", big},
		{"/phonebook/create", "alice", big},
		{"/phonebook/modify_cticontact", "alice", big},
		{"/phonebook/delete_cticontact", "alice", big},
		// Past MaxImport bytes, in long rows and in many short ones.
		{"/phonebook/import", "alice", "name,notes\n" + strings.Repeat("Anna,"+strings.Repeat("n", 1000)+"\n", MaxImport/1000)},
		{"/phonebook/import", "alice", "name\n" + strings.Repeat("Anna\n", MaxImport/5+1)},
		// Under MaxImport bytes but more than MaxImportRows rows.
		{"/phonebook/import", "alice", "name\n" + strings.Repeat("A\n", phonebook.MaxImportRows+1)},
		// A header line longer than the limit.
		{"/phonebook/import", "alice", strings.Repeat("n", MaxImport+1)},
	} {
		r := f.do("POST", tc.path, tc.user, tc.body)
		if r.status != 413 || r.errorCode() != "too_large" {
			t.Errorf("POST %s with %d bytes: %d %s, want 413 too_large", tc.path, len(tc.body), r.status, r.body)
		}
	}
}

// TestStoreUnavailable: while the database behind the phonebook and the
// history is not reachable and migrated (a sqldb.Gate not yet prepared),
// their routes answer 503 store_unavailable with a Retry-After, and the
// live state is served; once the gate has prepared the database they
// work, without a new handler.
func TestStoreUnavailable(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gate := sqldb.NewGate(sqldb.SQL(db), sqldb.GateConfig{
		Prepare: func(ctx context.Context) error {
			if _, err := phonebook.Schema.MigrateSQLite(ctx, db); err != nil {
				return err
			}
			_, err := history.Schema.MigrateSQLite(ctx, db)
			return err
		},
		CheckEvery: 20 * time.Millisecond,
	})
	norm := phonebook.Normalizer{Country: "39", Trunk: "0", Intl: "00"}
	book := phonebook.NewBook(phonebook.NewSQL(gate.Conn(), norm), phonebook.Config{Normalizer: norm})
	hs := history.NewSQL(gate.Conn(), history.Config{})
	f := newFixture(t, false, func(c *Config) { c.Phonebook, c.History, c.HistoryLocation = book, hs, time.UTC })

	routes := []struct{ method, path, body string }{
		{"GET", "/phonebook/search/rossi", ""},
		{"GET", "/phonebook/contact/1", ""},
		{"GET", "/phonebook/lookup/0721405516", ""},
		{"POST", "/phonebook/create", `{"name":"Mario Rossi"}`},
		{"POST", "/phonebook/import", "name\nAnna\n"},
		{"GET", "/historycall/interval/user/alice/20260301/20260302", ""},
		{"GET", "/historycall/interval/user/alice/20260301/20260302/csv", ""},
		{"GET", "/histcallswitch/interval/20260302/20260302", ""},
	}
	for _, rt := range routes {
		r := f.do(rt.method, rt.path, "root", rt.body)
		if r.status != 503 || r.errorCode() != "store_unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down: %d %s, want 503 store_unavailable with Retry-After", rt.method, rt.path, r.status, r.body)
		}
	}
	if r := f.do("GET", "/astproxy/extensions", "root", ""); r.status != 200 {
		t.Errorf("live state with the database down: %d %s", r.status, r.body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gate.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); !gate.Up(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gate never prepared the database")
		}
	}
	for _, rt := range routes {
		r := f.do(rt.method, rt.path, "root", rt.body)
		if r.status == 503 || r.status >= 500 {
			t.Errorf("%s %s once the database is up: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

// TestOversizedImportRemote: through a remote phonebook too, an import
// past MaxImport is a 413 (the limit cuts the upload to the service).
func TestOversizedImportRemote(t *testing.T) {
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"imported":0,"errors":[]}`)
	}))
	defer remote.Close()
	uc, err := upstream.New(upstream.Config{URLs: []string{remote.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	f := newFixture(t, false, func(c *Config) { c.Phonebook = phonebook.NewRemote(uc, phonebook.RemoteConfig{}) })
	r := f.do("POST", "/phonebook/import", "alice", "name\n"+strings.Repeat("Anna\n", MaxImport/5+1))
	if r.status != 413 || r.errorCode() != "too_large" {
		t.Errorf("oversized import through the remote phonebook: %d %s, want 413 too_large", r.status, r.body)
	}
}
