package phonebook

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestMemorySearchMatchesSQL compares the Book's in-memory search with
// Store.Search on both drivers: the same pages, counts and order for many
// terms, viewers and pages over contacts with shared names, private and
// speed-dial contacts, literal %, _, \ and quotes, unicode and numbers.
func TestMemorySearchMatchesSQL(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			s := be.open(t)
			r := rand.New(rand.NewPCG(7, 8))
			owners := []string{"", "alice", "bob"}
			types := []string{TypePublic, TypePublic, TypePublic, TypePrivate, TypeSpeeddial}
			pieces := []string{"Rossi", "rossi", "ROSSI", "Zoë", "ZOË", "zoe", "Müller", "100%", "snake_case", "O'Brien",
				`Back\slash`, `"Q"`, "日本語", "会社", "de Luca", "DeLuca", "Ab", "ab", "a", "İstanbul", "ß", "Σίσυφος", "ﬁne"}
			var cs []Contact
			for i := range 200 {
				name := pieces[r.IntN(len(pieces))] + " " + pieces[r.IntN(len(pieces))]
				if i%7 == 0 {
					name = "Same Name" // ties ordered by id
				}
				c := Contact{Type: types[r.IntN(len(types))], Name: name, Company: pieces[r.IntN(len(pieces))]}
				if c.Type != TypePublic {
					c.OwnerID = owners[1+r.IntN(2)]
				}
				if r.IntN(2) == 0 {
					c.WorkPhone = fmt.Sprintf("+39 0721 %06d", r.IntN(1000000))
				}
				if r.IntN(3) == 0 {
					c.CellPhone = fmt.Sprintf("+44 20 %07d", r.IntN(10000000))
				}
				cs = append(cs, c)
			}
			if err := s.CreateMany(ctx, cs); err != nil {
				t.Fatal(err)
			}
			// The user's own contacts from memory, and from SQL.
			b := NewBook(s, Config{Normalizer: italy})
			bSQL := NewBook(s, Config{Normalizer: italy, OwnTTL: -1})
			for _, b := range []*Book{b, bSQL} {
				if err := b.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
			}
			terms := []string{"", " ", "r", "ro", "ros", "rossi", "ROSSI", " rossi ", "zoë", "ZOË", "zo", "ë", "mü", "%", "0%",
				"_", "e_c", `\`, `k\s`, "'", "o'b", `"q"`, "本語", "会", "same", "same name", "a", "ab", "i̇", "ß", "ss",
				"σ", "ς", "fi", "ﬁ", "0721", "721", "+39 0721", "0039 721", "44", "+44", "0044 20", "7", "-", "9 9", "nothing"}
			for _, term := range terms {
				for _, viewer := range owners[:2] { // bob is alice's mirror image
					for _, pg := range [][2]int{{0, 0}, {7, 33}, {5, 1000}} {
						q := Query{Viewer: viewer, Term: term, Limit: pg[0], Offset: pg[1]}
						want, err := s.Search(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						for bi, b := range []*Book{b, bSQL} {
							got, err := b.Search(ctx, Actor{User: viewer}, term, pg[0], pg[1])
							if err != nil {
								t.Fatal(err)
							}
							if !reflect.DeepEqual(got, want) {
								t.Errorf("book %d: search %q as %q limit %d offset %d:\nmemory %d %s\nsql    %d %s",
									bi, term, viewer, pg[0], pg[1], got.Count, names(got), want.Count, names(want))
							}
						}
					}
				}
			}
			if m := b.mem.Load(); m == nil || m.gen != b.gen.Load() || b.own["alice"] == nil || bSQL.own != nil {
				t.Fatal("the in-memory search was not used")
			}
		})
	}
}

// TestMemorySearchReadsOwnWrites: a change made through the Book is seen
// by the next search, before any refresh.
func TestMemorySearchReadsOwnWrites(t *testing.T) {
	s := NewSQLite(openSQLite(t), italy)
	b := NewBook(s, Config{Normalizer: italy})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	root := Actor{User: "root", Admin: true}
	c, err := b.Create(ctx, root, Contact{Type: TypePublic, Name: "Fresh"})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Search(ctx, root, "fresh", 0, 0); names(p) != "Fresh" {
		t.Fatalf("after create: %q", names(p))
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c.Name = "Renamed"
	if _, err := b.Modify(ctx, root, c); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Search(ctx, root, "fresh", 0, 0); p.Count != 0 {
		t.Fatalf("after modify: %q", names(p))
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Search(ctx, root, "renamed", 0, 0); names(p) != "Renamed" {
		t.Fatalf("after refresh: %q", names(p))
	}
	// Private contacts: a change through the Book is seen at once, one
	// made elsewhere (another replica) after OwnTTL.
	b = NewBook(s, Config{Normalizer: italy, OwnTTL: 100 * time.Millisecond})
	alice := Actor{User: "alice"}
	if _, err := b.Create(ctx, alice, Contact{Name: "Mine"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Search(ctx, alice, "mine", 0, 0); names(p) != "Mine" || b.own["alice"] == nil {
		t.Fatalf("own contact: %q", names(p))
	}
	if _, err := s.Create(ctx, Contact{Type: TypePrivate, OwnerID: "alice", Name: "Mine too"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if p, _ := b.Search(ctx, alice, "mine", 0, 0); names(p) != "Mine,Mine too" {
		t.Fatalf("own contact added elsewhere: %q", names(p))
	}
}
