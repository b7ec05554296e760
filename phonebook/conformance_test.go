package phonebook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestConformance runs the same checks against every Store, and against
// every Store searched through a Book's in-memory path (memBackends).
func TestConformance(t *testing.T) {
	for _, be := range append(backends, memBackends()...) {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name string
				fn   func(t *testing.T, s Store)
			}{
				{"CRUD", testCRUD},
				{"Visibility", testVisibility},
				{"LiteralTerms", testLiteralTerms},
				{"Numbers", testNumbers},
				{"Paging", testPaging},
				{"Ownership", testOwnership},
				{"Import", testImport},
				{"IndexRefresh", testIndexRefresh},
			} {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, be.open(t)) })
			}
		})
	}
}

var ctx = context.Background()

// memStore searches through a Book's in-memory path, refreshed before
// every search; everything else goes to the Store.
type memStore struct {
	Store
	b *Book
	t testing.TB
}

func (m memStore) Search(ctx context.Context, q Query) (Page, error) {
	m.b.changed() // force a rebuild: a write in the same ms keeps the stamp
	if err := m.b.Refresh(ctx); err != nil {
		return Page{}, err
	}
	if mem := m.b.mem.Load(); mem == nil || mem.gen != m.b.gen.Load() {
		m.t.Fatalf("the in-memory search is not in use")
	}
	return m.b.Search(ctx, Actor{User: q.Viewer}, q.Term, q.Limit, q.Offset)
}

func memBackends() []backend {
	var out []backend
	for _, be := range backends {
		open := be.open
		out = append(out, backend{be.name + "/memory", func(t testing.TB) Store {
			s := open(t)
			return memStore{Store: s, b: NewBook(s, Config{Normalizer: italy}), t: t}
		}})
	}
	return out
}

func mustCreate(t *testing.T, s Store, c Contact) Contact {
	t.Helper()
	c, err := s.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(p Page) string {
	var out []string
	for _, c := range p.Rows {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func testCRUD(t *testing.T, s Store) {
	c := mustCreate(t, s, Contact{OwnerID: "alice", Type: TypePrivate, Name: "Mario Rossi", Company: "ACME",
		WorkPhone: "+39 0721 405516", WorkEmail: "mario@example.com", Notes: "line1\nline2"})
	if c.ID == 0 || c.Source != "cti" {
		t.Fatalf("created %+v", c)
	}
	got, err := s.Get(ctx, c.ID)
	if err != nil || got != c {
		t.Fatalf("get: %+v %v, want %+v", got, err, c)
	}
	c.Company = "Initech"
	if err := s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, c.ID); got.Company != "Initech" {
		t.Fatalf("after update %+v", got)
	}
	if err := s.Delete(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := s.Delete(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := s.Update(ctx, c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update deleted: %v", err)
	}
	for _, bad := range []Contact{
		{Type: "secret", Name: "x"},
		{Type: TypePublic},
		{Type: TypePublic, Name: strings.Repeat("x", MaxField+1)},
		{Type: TypePublic, Name: "bad\xff"},
		{Type: TypePublic, Name: "nul\x00"},
	} {
		if _, err := s.Create(ctx, bad); !IsInvalid(err) {
			t.Errorf("create %q/%q: %v, want invalid", bad.Type, bad.Name, err)
		}
	}
	// CreateMany is all or nothing.
	err = s.CreateMany(ctx, []Contact{{Type: TypePublic, Name: "ok"}, {Type: "nope", Name: "bad"}})
	if !IsInvalid(err) {
		t.Fatalf("CreateMany with a bad row: %v", err)
	}
	if p, _ := s.Search(ctx, Query{Viewer: "x"}); p.Count != 0 {
		t.Fatalf("CreateMany stored part: %+v", p)
	}
}

func testVisibility(t *testing.T, s Store) {
	mustCreate(t, s, Contact{OwnerID: "alice", Type: TypePrivate, Name: "Alice private"})
	mustCreate(t, s, Contact{OwnerID: "alice", Type: TypeSpeeddial, Name: "Alice speed", SpeeddialNum: "11"})
	mustCreate(t, s, Contact{OwnerID: "bob", Type: TypePrivate, Name: "Bob private"})
	mustCreate(t, s, Contact{OwnerID: "root", Type: TypePublic, Name: "Everyone"})
	for viewer, want := range map[string]string{
		"alice": "Alice private,Alice speed,Everyone",
		"bob":   "Bob private,Everyone",
		"carol": "Everyone",
		"":      "Everyone",
	} {
		p, err := s.Search(ctx, Query{Viewer: viewer})
		if err != nil {
			t.Fatal(err)
		}
		if names(p) != want || p.Count != strings.Count(want, ",")+1 {
			t.Errorf("%s sees %q (count %d), want %q", viewer, names(p), p.Count, want)
		}
	}
}

func testLiteralTerms(t *testing.T, s Store) {
	for _, n := range []string{"100% Pure", "1000 Pure", "snake_case", "snakeXcase", "O'Brien", `Quote "Q"`,
		`Back\slash`, "Zoë Müller", "ZOË MÜLLER Jr", "日本語 会社", "Robert'); DROP TABLE phonebook_contacts;--"} {
		mustCreate(t, s, Contact{Type: TypePublic, Name: n})
	}
	for term, want := range map[string]string{
		"%":             "100% Pure",
		"0%":            "100% Pure",
		"_":             "Robert'); DROP TABLE phonebook_contacts;--,snake_case",
		"e_c":           "snake_case",
		"'":             "O'Brien,Robert'); DROP TABLE phonebook_contacts;--",
		"o'b":           "O'Brien",
		`"q"`:           `Quote "Q"`,
		`\`:             `Back\slash`,
		`k\s`:           `Back\slash`,
		"zoë":           "ZOË MÜLLER Jr,Zoë Müller",
		"MÜLLER":        "ZOË MÜLLER Jr,Zoë Müller",
		"本語":            "日本語 会社",
		"drop table":    "Robert'); DROP TABLE phonebook_contacts;--",
		"nothing-there": "",
	} {
		p, err := s.Search(ctx, Query{Viewer: "x", Term: term})
		if err != nil {
			t.Fatalf("%q: %v", term, err)
		}
		if names(p) != want {
			t.Errorf("search %q = %q, want %q", term, names(p), want)
		}
	}
	if p, _ := s.Search(ctx, Query{Viewer: "x"}); p.Count != 11 {
		t.Errorf("table damaged: %d rows", p.Count)
	}
	for _, q := range []Query{{Limit: -1}, {Limit: MaxLimit + 1}, {Offset: -1}, {Term: strings.Repeat("a", MaxField+1)}} {
		if _, err := s.Search(ctx, q); !IsInvalid(err) {
			t.Errorf("%+v: %v, want invalid", q, err)
		}
	}
}

func testNumbers(t *testing.T, s Store) {
	mustCreate(t, s, Contact{Type: TypePublic, Name: "Mario", WorkPhone: "+39 0721 405516"})
	mustCreate(t, s, Contact{Type: TypePublic, Name: "Luigi", CellPhone: "333 123 4567", HomePhone: "0721 99 88 77"})
	mustCreate(t, s, Contact{Type: TypePrivate, OwnerID: "alice", Name: "Secret", Fax: "0721405516"})
	for _, n := range []string{"+39 0721 405516", "0039721405516", "0721405516", "0721-405-516"} {
		cs, err := s.Lookup(ctx, "bob", n)
		if err != nil || len(cs) != 1 || cs[0].Name != "Mario" {
			t.Errorf("lookup %q as bob: %+v %v", n, cs, err)
		}
		cs, _ = s.Lookup(ctx, "alice", n)
		if len(cs) != 2 || cs[0].Name != "Secret" {
			t.Errorf("lookup %q as alice: %+v", n, cs)
		}
		p, _ := s.Search(ctx, Query{Viewer: "bob", Term: n})
		if names(p) != "Mario" {
			t.Errorf("search %q = %q", n, names(p))
		}
	}
	// Partial numbers match as substrings; a substring never matches
	// an exact lookup.
	if p, _ := s.Search(ctx, Query{Viewer: "bob", Term: "0721"}); names(p) != "Luigi,Mario" {
		t.Errorf("search 0721 = %q", names(p))
	}
	if cs, _ := s.Lookup(ctx, "bob", "405516"); len(cs) != 0 {
		t.Errorf("lookup of a suffix matched %+v", cs)
	}
	if cs, err := s.Lookup(ctx, "bob", "not a number"); err != nil || len(cs) != 0 {
		t.Errorf("lookup of a name: %+v %v", cs, err)
	}
}

func testPaging(t *testing.T, s Store) {
	var cs []Contact
	for i := range 25 {
		cs = append(cs, Contact{Type: TypePublic, Name: fmt.Sprintf("Person %02d", i)})
	}
	if err := s.CreateMany(ctx, cs); err != nil {
		t.Fatal(err)
	}
	var all []string
	for off := 0; ; off += 10 {
		p, err := s.Search(ctx, Query{Viewer: "x", Term: "person", Limit: 10, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		if p.Count != 25 {
			t.Fatalf("offset %d: count %d", off, p.Count)
		}
		if len(p.Rows) == 0 {
			break
		}
		all = append(all, names(p))
	}
	if got := strings.Join(all, ","); strings.Count(got, ",") != 24 || !strings.HasPrefix(got, "Person 00,Person 01") {
		t.Errorf("pages: %s", got)
	}
}

func testOwnership(t *testing.T, s Store) {
	b := NewBook(s, Config{Normalizer: italy})
	alice, bob, root := Actor{User: "alice"}, Actor{User: "bob"}, Actor{User: "root", Admin: true}
	priv, err := b.Create(ctx, alice, Contact{Name: "Mine", OwnerID: "bob"})
	if err != nil || priv.OwnerID != "alice" || priv.Type != TypePrivate {
		t.Fatalf("create: %+v %v", priv, err)
	}
	if _, err := b.Create(ctx, alice, Contact{Type: TypePublic, Name: "Pub"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("user created a public contact: %v", err)
	}
	pub, err := b.Create(ctx, root, Contact{Type: TypePublic, Name: "Pub"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, bob, priv.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob reads alice's private contact: %v", err)
	}
	priv.Name = "Renamed"
	if _, err := b.Modify(ctx, bob, priv); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob modifies alice's contact: %v", err)
	}
	if err := b.Delete(ctx, bob, priv.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deletes alice's contact: %v", err)
	}
	priv.Type = TypePublic
	if _, err := b.Modify(ctx, alice, priv); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice makes her contact public: %v", err)
	}
	priv.Type = TypeSpeeddial
	priv.OwnerID = "bob"
	if c, err := b.Modify(ctx, alice, priv); err != nil || c.OwnerID != "alice" {
		t.Errorf("alice modifies hers: %+v %v", c, err)
	}
	pub.Name = "Pub2"
	if _, err := b.Modify(ctx, alice, pub); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice modifies a public contact: %v", err)
	}
	if err := b.Delete(ctx, alice, pub.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice deletes a public contact: %v", err)
	}
	if _, err := b.Modify(ctx, root, pub); err != nil {
		t.Errorf("admin modifies a public contact: %v", err)
	}
	if err := b.Delete(ctx, root, pub.ID); err != nil {
		t.Errorf("admin deletes a public contact: %v", err)
	}
	if err := b.Delete(ctx, alice, priv.ID); err != nil {
		t.Errorf("alice deletes hers: %v", err)
	}
}

func testImport(t *testing.T, s Store) {
	b := NewBook(s, Config{Normalizer: italy})
	alice := Actor{User: "alice"}
	csv := "name,company,workphone,type,notes\n" +
		"Mario Rossi,ACME,+39 0721 405516,,\n" + // line 2
		"Too,Many,Fields,private,x,extra\n" + // line 3: wrong field count
		",,,,\n" + // line 4: no name nor company
		"Anna,\"Multi\nLine Co\",333,,\"a \"\"quoted\"\" note\"\n" + // lines 5-6
		"Pub,X,1,public,\n" + // line 7: alice may not import public
		"Bad,X,1,weird,\n" + // line 8: bad type
		"Last,Y,2,speeddial,\n" // line 9
	rep, err := b.Import(ctx, alice, strings.NewReader(csv), ImportOptions{AllOrNothing: true})
	if err != nil || rep.Imported != 0 || len(rep.Errors) != 4 {
		t.Fatalf("all or nothing: %+v %v", rep, err)
	}
	if p, _ := s.Search(ctx, Query{Viewer: "alice"}); p.Count != 0 {
		t.Fatalf("all-or-nothing import stored %d", p.Count)
	}
	rep, err = b.Import(ctx, alice, strings.NewReader(csv), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, e := range rep.Errors {
		lines = append(lines, e.Line)
	}
	if rep.Imported != 3 || fmt.Sprint(lines) != "[3 4 7 8]" {
		t.Fatalf("import: %+v", rep)
	}
	p, _ := s.Search(ctx, Query{Viewer: "alice"})
	if names(p) != "Anna,Last,Mario Rossi" || p.Rows[0].Company != "Multi\nLine Co" || p.Rows[0].Notes != `a "quoted" note` ||
		p.Rows[1].Type != TypeSpeeddial || p.Rows[2].OwnerID != "alice" || p.Rows[2].Source != "csv" {
		t.Fatalf("imported: %+v", p.Rows)
	}
	for _, bad := range []string{"", "name,nosuch\nx,y\n", "name,name\nx,y\n"} {
		if _, err := b.Import(ctx, alice, strings.NewReader(bad), ImportOptions{}); !IsInvalid(err) {
			t.Errorf("import %q: %v", bad, err)
		}
	}
}

func testIndexRefresh(t *testing.T, s Store) {
	b := NewBook(s, Config{Normalizer: italy, RefreshEvery: 50 * time.Millisecond})
	root := Actor{User: "root", Admin: true}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- b.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(number, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for b.Lookup(number) != want {
			if time.Now().After(deadline) {
				t.Fatalf("Lookup(%q) = %q, want %q", number, b.Lookup(number), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c, err := b.Create(ctx, root, Contact{Type: TypePublic, Name: "Mario", WorkPhone: "+39 0721 405516"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("0721405516", "Mario")
	c.Name = "Mario R."
	if _, err := b.Modify(ctx, root, c); err != nil {
		t.Fatal(err)
	}
	waitFor("0039721405516", "Mario R.")
	// A change made behind the Book's back (another replica) is seen by
	// the periodic check.
	c.Name = "Elsewhere"
	if err := s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitFor("0721405516", "Elsewhere")
	if err := b.Delete(ctx, root, c.ID); err != nil {
		t.Fatal(err)
	}
	waitFor("0721405516", "")
}
