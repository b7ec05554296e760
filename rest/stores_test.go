package rest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
)

// storeFixture runs the handler with an embedded (SQLite) phonebook and
// history; history holds calls of 2000 (alice) and 2001 (bob) on
// 2026-03-02.
func storeFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if _, err := phonebook.Schema.MigrateSQLite(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := history.Schema.MigrateSQLite(ctx, db); err != nil {
		t.Fatal(err)
	}
	norm := phonebook.Normalizer{Country: "39", Trunk: "0", Intl: "00"}
	book := phonebook.NewBook(phonebook.NewSQLite(db, norm), phonebook.Config{Normalizer: norm,
		Owners: func() []string { return []string{"alice", "bob"} }})
	hs := history.NewSQLite(db, history.Config{NameLookup: book.Lookup, MaxWindow: 31 * 24 * time.Hour})
	day := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var cdrs []history.CDR
	for i, pair := range [][2]string{{"2000", "2001"}, {"0721405516", "2000"}, {"2001", "2005"}} {
		id := fmt.Sprintf("1772441000.%d", i)
		cdrs = append(cdrs, history.CDR{CallDate: day.Add(time.Duration(i) * time.Hour), Src: pair[0], Dst: pair[1],
			Disposition: "ANSWERED", Duration: 10, Billsec: 8, UniqueID: id, LinkedID: id, CLID: "=cmd|' /C calc'!A0"})
	}
	if err := hs.Insert(ctx, cdrs); err != nil {
		t.Fatal(err)
	}
	return newFixture(t, false, func(c *Config) {
		c.Phonebook, c.History, c.HistoryLocation = book, hs, time.UTC
	})
}

func TestPhonebookRoutes(t *testing.T) {
	f := storeFixture(t)
	r := f.do("POST", "/phonebook/create", "alice", `{"name":"Mario Rossi","workphone":"+39 0721 405516","notes":"two\nlines"}`)
	var c phonebook.Contact
	if json.Unmarshal(r.body, &c); r.status != 200 || c.ID == 0 || c.OwnerID != "alice" || c.Type != "private" || c.Notes != "two\nlines" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/phonebook/create", "alice", `{"name":"Pub","type":"public"}`); r.status != 403 {
		t.Errorf("user creates public: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/phonebook/create", "root", `{"name":"ACME desk","type":"public","workphone":"0721 999"}`); r.status != 200 {
		t.Errorf("admin creates public: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		method, path, user, body string
		status                   int
		has                      string
	}{
		{"GET", "/phonebook/search/rossi", "alice", "", 200, `"count":1`},
		{"GET", "/phonebook/search/rossi", "bob", "", 200, `"count":0`},
		{"GET", "/phonebook/search/%25", "alice", "", 200, `"count":0`},
		{"GET", "/phonebook/search/0039721405516", "alice", "", 200, `"Mario Rossi"`},
		{"GET", "/phonebook/search/x?limit=-1", "alice", "", 400, "bad_request"},
		{"GET", "/phonebook/search/x?limit=9999", "alice", "", 400, "bad_request"},
		{"GET", "/phonebook/lookup/0721405516", "alice", "", 200, `"count":1`},
		{"GET", fmt.Sprintf("/phonebook/contact/%d", c.ID), "alice", "", 200, "Mario"},
		{"GET", fmt.Sprintf("/phonebook/contact/%d", c.ID), "bob", "", 404, "not_found"},
		{"GET", "/phonebook/contact/abc", "alice", "", 400, "bad_request"},
		{"POST", "/phonebook/modify_cticontact", "bob", fmt.Sprintf(`{"id":%d,"name":"x"}`, c.ID), 404, "not_found"},
		{"POST", "/phonebook/modify_cticontact", "alice", fmt.Sprintf(`{"id":%d,"name":"Mario R."}`, c.ID), 200, "Mario R."},
		{"POST", "/phonebook/modify_cticontact", "alice", `{"name":"no id"}`, 400, "bad_request"},
		{"POST", "/phonebook/create", "alice", `{"name":"x","bogus":1}`, 400, "bad_request"},
		{"POST", "/phonebook/create", "alice", `{"name":"a\nb"}`, 400, "bad_request"},
		{"POST", "/phonebook/create", "alice", `{"company":"","name":""}`, 400, "bad_request"},
		{"POST", "/phonebook/delete_cticontact", "bob", fmt.Sprintf(`{"id":%d}`, c.ID), 404, "not_found"},
		{"POST", "/phonebook/delete_cticontact", "alice", fmt.Sprintf(`{"id":%d}`, c.ID), 200, "{}"},
		{"POST", "/phonebook/import", "alice", "name,workphone\nAnna,333\n\"bad\n", 200, `"imported":1`},
		{"POST", "/phonebook/import?all_or_nothing=true", "alice", "name,workphone\nAnna,333\nToo,many,fields\n", 200, `"imported":0`},
		{"POST", "/phonebook/import", "alice", "nosuch\nx\n", 400, "unknown column"},
		{"GET", "/phonebook/search/x", "", "", 401, "no_token"},
	} {
		r := f.do(tc.method, tc.path, tc.user, tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.has) {
			t.Errorf("%s %s as %s: %d %s, want %d with %s", tc.method, tc.path, tc.user, r.status, r.body, tc.status, tc.has)
		}
	}
	// The index follows changes (Book.Run is not running here: refresh).
	f.h.cfg.Phonebook.(*phonebook.Book).Refresh(context.Background())
	if got := f.h.cfg.Phonebook.Lookup("+39 0721 999"); got != "ACME desk" {
		t.Errorf("index lookup: %q", got)
	}
}

func TestHistoryRoutes(t *testing.T) {
	f := storeFixture(t)
	for _, tc := range []struct {
		path, user string
		status     int
		has        string
	}{
		{"/historycall/interval/user/alice/20260301/20260302", "alice", 200, `"count":2`},
		{"/historycall/interval/user/alice/20260302/20260302?direction=in", "alice", 200, `"count":1`},
		{"/historycall/interval/user/bob/20260301/20260302", "alice", 403, "forbidden"},
		{"/historycall/interval/user/bob/20260301/20260302", "root", 200, `"count":2`},
		{"/historycall/interval/user/nobody/20260301/20260302", "root", 404, "not_found"},
		{"/historycall/interval/user/alice/20260301/20260302?limit=1", "alice", 200, `"next":"`},
		{"/historycall/interval/user/alice/2026-03-01/20260302", "alice", 400, "from"},
		{"/historycall/interval/user/alice/20260301/20261302", "alice", 400, "to"},
		{"/historycall/interval/user/alice/20260302/20260301", "alice", 400, "before"},
		{"/historycall/interval/user/alice/20260101/20260302", "alice", 400, "window"},
		{"/historycall/interval/user/alice/20260301/20260302?direction=up", "alice", 400, "direction"},
		{"/historycall/interval/user/alice/20260301/20260302?cursor=%21", "alice", 400, "cursor"},
		{"/histcallswitch/interval/20260302/20260302", "alice", 403, "switchboard_history"},
		{"/histcallswitch/interval/20260302/20260302", "root", 200, `"count":3`},
		{"/histcallswitch/interval/20260302/20260302/csv", "root", 200, "'=cmd"},
		{"/histcallswitch/interval/20260302/20260202/csv", "root", 400, "before"},
		{"/historycall/interval/user/alice/20260302/20260302/csv", "alice", 200, "calldate,src"},
	} {
		r := f.do("GET", tc.path, tc.user, "")
		if r.status != tc.status || !strings.Contains(string(r.body), tc.has) {
			t.Errorf("%s as %s: %d %s, want %d with %s", tc.path, tc.user, r.status, r.body, tc.status, tc.has)
		}
	}
	r := f.do("GET", "/historycall/interval/user/alice/20260302/20260302/csv", "alice", "")
	if ct := r.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" || strings.Count(string(r.body), "\n") != 3 {
		t.Errorf("csv: %s\n%s", ct, r.body)
	}
}

// A user's own contacts name the numbers of her own history, for her
// only; the public phonebook names them for everyone.
func TestHistoryOwnContactNames(t *testing.T) {
	f := storeFixture(t)
	if r := f.do("POST", "/phonebook/create", "root", `{"name":"Rossi Srl","type":"public","workphone":"+39 0721 405516"}`); r.status != 200 {
		t.Fatalf("public: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/phonebook/create", "alice", `{"name":"Mario (mine)","cellphone":"0039 721 405516"}`); r.status != 200 {
		t.Fatalf("private: %d %s", r.status, r.body)
	}
	if err := f.h.cfg.Phonebook.(*phonebook.Book).Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A call from the number with no caller ID name, and one alice made.
	at := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
	if err := f.h.cfg.History.Insert(context.Background(), []history.CDR{
		{CallDate: at, Src: "0721405516", Dst: "2000", Disposition: "ANSWERED", UniqueID: "1772463600.1", LinkedID: "1772463600.1"},
		{CallDate: at.Add(time.Minute), Src: "2000", Dst: "0721405516", Disposition: "ANSWERED", UniqueID: "1772463660.1", LinkedID: "1772463660.1"},
	}); err != nil {
		t.Fatal(err)
	}
	names := func(user, path string) []string {
		r := f.do("GET", path, user, "")
		var p history.Page
		if err := json.Unmarshal(r.body, &p); r.status != 200 || err != nil {
			t.Fatalf("%s as %s: %d %s", path, user, r.status, r.body)
		}
		var out []string
		for _, c := range p.Rows {
			switch {
			case c.Src == "0721405516":
				out = append(out, "from "+c.CNAM)
			case c.Dst == "0721405516":
				out = append(out, "to "+c.DstCNAM)
			}
		}
		return out
	}
	// The first call's caller ID name (the PBX's) stays.
	want := "[to Mario (mine) from Mario (mine) from =cmd|' /C calc'!A0]"
	if got := fmt.Sprint(names("alice", "/historycall/interval/user/alice/20260301/20260302")); got != want {
		t.Errorf("alice's own history: %s, want %s", got, want)
	}
	want = "[to Rossi Srl from Rossi Srl from =cmd|' /C calc'!A0]"
	if got := fmt.Sprint(names("root", "/historycall/interval/user/alice/20260301/20260302")); got != want {
		t.Errorf("alice's history read by root: %s, want %s (her private contact must not show)", got, want)
	}
	r := f.do("GET", "/historycall/interval/user/alice/20260301/20260302/csv", "alice", "")
	if !strings.Contains(string(r.body), "Mario (mine)") {
		t.Errorf("alice's own csv: %s", r.body)
	}
}
