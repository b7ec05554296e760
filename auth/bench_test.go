package auth

import (
	"fmt"
	"testing"
)

// BenchmarkTokenCheck: the check every REST request makes, among 10,000
// live sessions.
func BenchmarkTokenCheck(b *testing.B) {
	ts := NewTokens(0, nil, nil)
	for i := range 10_000 {
		ts.Issue(fmt.Sprintf("u%d", i))
	}
	tok, _, _ := ts.Issue("alice")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ts.Check(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowed: one permission question of a user with the default
// profile.
func BenchmarkAllowed(b *testing.B) {
	us := mustUsers(b)
	olga, _ := us.Lookup("olga")
	b.ReportAllocs()
	for b.Loop() {
		if !Allowed(olga, Hangup, "201") {
			b.Fatal("refused")
		}
	}
}

func TestAllowedDoesNotAllocate(t *testing.T) {
	us := mustUsers(t)
	olga, _ := us.Lookup("olga")
	if n := testing.AllocsPerRun(100, func() { Allowed(olga, SeeCalls, "201"); Allowed(olga, Record, "999") }); n != 0 {
		t.Errorf("Allowed allocates %v times", n)
	}
}
