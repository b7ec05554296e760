package main

import (
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// History names an extension by the PBX's directory (dst_cnam of a call
// to 202 was empty unless 202 was in the phonebook), other numbers by the
// public phonebook; a pop-up without a local phonebook uses the public
// names.
func TestNumberNames(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{{Username: "alice", PasswordHash: string(hash), Endpoints: []string{"201"}}, {Username: "ops", PasswordHash: string(hash)}})
	if err != nil {
		t.Fatal(err)
	}
	n := &numberNames{users: func() *auth.Users { return users }, public: func(num string) string {
		return map[string]string{"0721405516": "Rossi Srl", "202": "Phonebook Bob"}[num]
	}}
	if got := n.name("202"); got != "Phonebook Bob" {
		t.Errorf("before the engine: %q", got)
	}
	eng := calls.New(calls.Config{Names: map[string]string{"201": "Alice", "202": "Bob"}})
	eng.Publish()
	n.state.Store(&namesState{eng})
	for num, want := range map[string]string{"202": "Bob", "201": "Alice", "0721405516": "Rossi Srl", "203": "", "": ""} {
		if got := n.name(num); got != want {
			t.Errorf("name(%q) = %q, want %q", num, got, want)
		}
	}
	if got := n.ring("201", "0721405516"); got != "Rossi Srl" {
		t.Errorf("ring = %q", got)
	}
	if got := n.owners(); len(got) != 1 || got[0] != "alice" {
		t.Errorf("owners = %v", got)
	}
}
