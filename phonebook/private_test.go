package phonebook

import (
	"context"
	"testing"
)

// A user's own contacts name her callers for her; everyone else gets the
// public contact, and national and international notations match.
func TestLookupForOwnContacts(t *testing.T) {
	ctx := context.Background()
	owners := []string{"alice", "bob"}
	b := NewBook(NewSQLite(openSQLite(t), italy), Config{Normalizer: italy, Owners: func() []string { return owners }})
	admin := Actor{User: "root", Admin: true}
	if _, err := b.Create(ctx, admin, Contact{Type: TypePublic, Name: "Rossi Srl", WorkPhone: "+39 0721 405516"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, Actor{User: "alice"}, Contact{Type: TypePrivate, Name: "Mario (mine)", CellPhone: "0039 0721 405516"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, Actor{User: "carol"}, Contact{Type: TypePrivate, Name: "Carol's", WorkPhone: "0612345678"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, num, want string }{
		{"alice", "0721405516", "Mario (mine)"},
		{"alice", "+390721405516", "Mario (mine)"},
		{"bob", "0721405516", "Rossi Srl"},
		{"", "0721 405516", "Rossi Srl"},
		{"carol", "0612345678", ""}, // carol owns no extension: not indexed
		{"alice", "0612345678", ""},
	} {
		if got := b.LookupFor(c.user, c.num); got != c.want {
			t.Errorf("LookupFor(%q, %q) = %q, want %q", c.user, c.num, got, c.want)
		}
	}
	if got := b.Lookup("0721405516"); got != "Rossi Srl" {
		t.Errorf("Lookup = %q: private contacts leaked into the public index", got)
	}
	// A new owner (users file reloaded) is indexed at the next refresh,
	// though no contact changed.
	owners = []string{"alice", "bob", "carol"}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.LookupFor("carol", "0612345678"); got != "Carol's" {
		t.Errorf("carol after reload: %q", got)
	}
	if got := b.LookupOwn("carol", "0721405516"); got != "" {
		t.Errorf("LookupOwn gave a public name: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { b.LookupFor("alice", "0721405516") }); n != 0 {
		t.Errorf("LookupFor allocates %v times", n)
	}
}
