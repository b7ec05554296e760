package nethcti

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/phonebook"
)

// phonebookFixture has a public contact, alice's private contact and
// speed dial, and bob's speed dial.
func phonebookFixture(t *testing.T) *fixture {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "p.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := phonebook.Schema.MigrateSQLite(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	book := phonebook.NewBook(phonebook.NewSQLite(db, phonebook.Normalizer{}), phonebook.Config{})
	ctx := context.Background()
	for _, c := range []struct {
		owner string
		admin bool
		c     phonebook.Contact
	}{
		{"root", true, phonebook.Contact{Type: "public", Name: "Mario Rossi", Company: "Nethesis", WorkPhone: "0721405516"}},
		{"alice", false, phonebook.Contact{Type: "private", Name: "Alice's dentist", CellPhone: "3331112222"}},
		{"alice", false, phonebook.Contact{Type: "speeddial", Name: "Bob", SpeeddialNum: "202", Notes: "speeddial-favorite"}},
		{"bob", false, phonebook.Contact{Type: "speeddial", Name: "Carol", SpeeddialNum: "203"}},
	} {
		if _, err := book.Create(ctx, phonebook.Actor{User: c.owner, Admin: c.admin}, c.c); err != nil {
			t.Fatal(err)
		}
	}
	return newFixtureStores(t, nil, book)
}

func names(t *testing.T, rows []phonebook.Contact) []string {
	var out []string
	for _, c := range rows {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// TestPhonebookLists: the web app's and NethLink's lists (nethvoice-cti
// lib/phonebook.ts, nethlink useNethVoiceAPI.ts Phonebook.search and
// speeddials) show what the native search shows the user.
func TestPhonebookLists(t *testing.T) {
	f := phonebookFixture(t)
	for _, path := range []string{"/phonebook/search/?offset=0&limit=10&view=all&visibility=all&sort=displayname", "/phonebook/search"} {
		r := f.apiDo("GET", path, "alice", "")
		var p phonebook.Page
		json.Unmarshal(r.body, &p)
		if want := []string{"Alice's dentist", "Bob", "Mario Rossi"}; r.status != 200 || p.Count != 3 || !slices.Equal(names(t, p.Rows), want) {
			t.Errorf("%s: %d %s, want %v", path, r.status, r.body, want)
		}
	}
	r := f.apiDo("GET", "/phonebook/speeddials", "alice", "")
	var sd []phonebook.Contact
	json.Unmarshal(r.body, &sd)
	if r.status != 200 || !slices.Equal(names(t, sd), []string{"Bob"}) {
		t.Errorf("alice's speed dials: %d %s", r.status, r.body)
	}
	// cticontact is the native contact read: bob may not read alice's.
	var dentist int64
	var all phonebook.Page
	json.Unmarshal(f.apiDo("GET", "/phonebook/search", "alice", "").body, &all)
	for _, c := range all.Rows {
		if c.Type == "private" {
			dentist = c.ID
		}
	}
	id := "/phonebook/cticontact/" + strconv.FormatInt(dentist, 10)
	if a, b := f.apiDo("GET", id, "alice", ""), f.apiDo("GET", id, "bob", ""); a.status != 200 || b.status != 404 {
		t.Errorf("cticontact: alice %d, bob %d %s; want 200 and 404", a.status, b.status, b.body)
	}
	if r := f.apiDo("GET", "/phonebook/search/mario", "alice", ""); r.status != 200 || !json.Valid(r.body) {
		t.Errorf("search with a term: %d", r.status)
	}
}

// TestPhonebookWrites: the web app's and NethLink's contact bodies
// (nethlink useNethVoiceAPI.ts createContact, deleteContact: the id as a
// string) reach the native routes; a NethCTI-only field with a value is
// refused, never dropped.
func TestPhonebookWrites(t *testing.T) {
	f := phonebookFixture(t)
	r := f.apiDo("POST", "/phonebook/create", "alice", `{"type":"private","name":"Zoe","workphone":"0612345678","title":"","workstreet":"","extension":null}`)
	var c phonebook.Contact
	if json.Unmarshal(r.body, &c); r.status != 200 || c.ID == 0 || c.OwnerID != "alice" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := f.apiDo("POST", "/phonebook/create", "alice", `{"type":"private","name":"Yves","workstreet":"Via Roma 1"}`); r.status != 400 ||
		!strings.Contains(string(r.body), "workstreet") {
		t.Errorf("a NethCTI-only field with a value: %d %s, want 400 naming it", r.status, r.body)
	}
	id := strconv.FormatInt(c.ID, 10)
	if r := f.apiDo("POST", "/phonebook/modify_cticontact", "alice", `{"id":"`+id+`","type":"private","name":"Zoe B"}`); r.status != 200 {
		t.Errorf("modify with a string id: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/webrest/phonebook/delete_cticontact", `{"id":"`+id+`"}`, "Authorization", "Bearer x"); r.status != 401 {
		t.Errorf("delete without a legacy token: %d", r.status)
	}
	if r := f.apiDo("POST", "/phonebook/delete_cticontact", "bob", `{"id":"`+id+`"}`); r.status == 200 {
		t.Error("bob deleted alice's contact")
	}
	if r := f.apiDo("POST", "/phonebook/delete_cticontact", "alice", `{"id":"`+id+`"}`); r.status != 200 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
}

// TestPhonebookViews: the web app's filters (nethvoice-cti
// lib/phonebook.ts getPhonebook: view all/person/company, visibility
// all/public/private/group; components/phonebook/Filter.tsx), company
// rows as nethcti-server's company view and as mapContact reads them
// (no person's name, "contacts" a JSON string), paged over the rows.
func TestPhonebookViews(t *testing.T) {
	f := phonebookFixture(t)
	for _, c := range []struct{ user, body string }{
		{"root", `{"type":"public","name":"-","company":"Nethesis","workphone":"0721405500"}`},
		{"alice", `{"type":"private","name":"Luca Bianchi","company":"Nethesis"}`},
		{"root", `{"type":"public","name":"Anna Verdi","company":"Acme"}`},
	} {
		if r := f.apiDo("POST", "/phonebook/create", c.user, c.body); r.status != 200 {
			t.Fatalf("create %s: %d %s", c.body, r.status, r.body)
		}
	}
	list := func(q string) (int, []string, []map[string]any) {
		r := f.apiDo("GET", "/phonebook/search/"+q, "alice", "")
		var p struct {
			Count int
			Rows  []map[string]any
		}
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		var got []string
		for _, row := range p.Rows {
			if n, _ := row["name"].(string); n != "" {
				got = append(got, n)
			} else {
				got = append(got, "company "+row["company"].(string))
			}
		}
		return p.Count, got, p.Rows
	}
	for _, c := range []struct {
		q     string
		count int
		want  []string
	}{
		{"?view=person&visibility=all", 4, []string{"Alice's dentist", "Anna Verdi", "Luca Bianchi", "Mario Rossi"}},
		{"?view=all&visibility=public", 3, []string{"-", "Anna Verdi", "Mario Rossi"}},
		{"?view=all&visibility=private", 2, []string{"Alice's dentist", "Luca Bianchi"}},
		{"?view=all&visibility=group", 0, nil},
		{"nethesis?view=person&visibility=all", 2, []string{"Luca Bianchi", "Mario Rossi"}},
		{"?view=company&visibility=all", 2, []string{"company Acme", "company Nethesis"}},
		{"?view=company&visibility=all&offset=1&limit=1", 2, []string{"company Nethesis"}},
		{"?view=company&visibility=private", 1, []string{"company Nethesis"}},
		{"?view=person&visibility=all&offset=1&limit=2", 4, []string{"Anna Verdi", "Luca Bianchi"}},
	} {
		n, got, _ := list(c.q)
		slices.Sort(got)
		if n != c.count || !slices.Equal(got, c.want) {
			t.Errorf("%s: count %d rows %q, want %d %q", c.q, n, got, c.count, c.want)
		}
	}
	_, _, rows := list("?view=company")
	for _, row := range rows {
		var people []struct {
			ID     int64
			Name   string
			Source string
		}
		if err := json.Unmarshal([]byte(row["contacts"].(string)), &people); err != nil {
			t.Fatalf("contacts %v: %v", row["contacts"], err)
		}
		var ns []string
		for _, p := range people {
			ns = append(ns, p.Name)
		}
		switch row["company"] {
		case "Nethesis":
			if row["workphone"] != "0721405500" || row["id"] == nil || !slices.Equal(ns, []string{"Luca Bianchi", "Mario Rossi"}) {
				t.Errorf("Nethesis: %v, people %q", row, ns)
			}
		case "Acme":
			if row["id"] != nil || !slices.Equal(ns, []string{"Anna Verdi"}) {
				t.Errorf("Acme (no company contact): %v, people %q", row, ns)
			}
		}
	}
	for _, q := range []string{"?view=groups", "?visibility=shared"} {
		if r := f.apiDo("GET", "/phonebook/search/"+q, "alice", ""); r.status != 400 {
			t.Errorf("%s: %d, want 400", q, r.status)
		}
	}
	// The web app's person: firstname and lastname beside the name made
	// of them are taken (the name is kept); parts that disagree with the
	// name are refused, never dropped.
	if r := f.apiDo("POST", "/phonebook/create", "alice", `{"type":"private","name":"Ugo Neri","firstname":"Ugo","lastname":"Neri"}`); r.status != 200 {
		t.Errorf("the web app's person: %d %s, want 200", r.status, r.body)
	}
	if r := f.apiDo("POST", "/phonebook/create", "alice", `{"type":"private","name":"Ugo","firstname":"Ugo","lastname":"Neri"}`); r.status != 400 ||
		!strings.Contains(string(r.body), "firstname, lastname") {
		t.Errorf("parts that disagree: %d %s, want 400 naming them", r.status, r.body)
	}
	// The web app's group sharing (type "group:<groups>") is refused with
	// its reason, never stored as something else.
	if r := f.apiDo("POST", "/phonebook/create", "alice", `{"type":"group:sales","name":"Team"}`); r.status != 501 {
		t.Errorf("a group-shared contact: %d %s, want 501", r.status, r.body)
	}
}
