package auth

import (
	"slices"
	"testing"

	"github.com/ctibridge/ctibridge/calls"
)

// What a view hides, field by field, is the calls.NumbersHidden class
// (calls/class_test.go checks it against these users' views); here, which
// class each view picks.
func TestViewClass(t *testing.T) {
	us := mustUsers(t)
	alice, _ := us.Lookup("alice")
	paula, _ := us.Lookup("paula")
	olga, _ := us.Lookup("olga")
	root, _ := us.Lookup("root")
	if ViewOf(alice).Key() != "u:201" || ViewOf(nil).Full() || ViewOf(paula).Key() != "" {
		t.Error("keys")
	}
	for _, c := range []struct {
		u     *User
		owner string
		want  calls.Class
	}{
		{alice, "201", calls.Full}, {alice, "202", calls.NumbersHidden}, {alice, "", calls.NumbersHidden},
		{paula, "202", calls.Full}, {paula, "", calls.Full},
		{olga, "201", calls.Full}, {olga, "202", calls.NumbersHidden}, {olga, "", calls.Full},
		{root, "999", calls.Full}, {nil, "201", calls.NumbersHidden},
	} {
		if got := ViewOf(c.u).Class(c.owner); got != c.want {
			t.Errorf("%v sees %q as class %d, want %d", c.u, c.owner, got, c.want)
		}
	}
	if got := ViewOf(olga).FullExtensions(); !slices.Equal(got, []string{"201", "203"}) {
		t.Errorf("olga's full extensions %v", got)
	}
	if got := ViewOf(alice).FullExtensions(); !slices.Equal(got, []string{"201"}) {
		t.Errorf("alice's full extensions %v", got)
	}
	if ViewOf(nil).FullExtensions() != nil {
		t.Error("nobody sees an extension in full")
	}
	if !ViewOf(alice).SeesMember("201") || ViewOf(alice).SeesMember("0612345678") || ViewOf(alice).SeesMember("") ||
		!ViewOf(paula).SeesMember("0612345678") || !ViewOf(paula).SeesMember("") {
		t.Error("conference members")
	}
}

func TestOpaque(t *testing.T) {
	a, b := OpaqueChannel("Local/0612345678@from-internal-0000002a;1"), OpaqueChannel("PJSIP/trunk-0000000a")
	if a == b || len(a) != 21 || a[0] != '~' || a != OpaqueChannel("Local/0612345678@from-internal-0000002a;1") {
		t.Errorf("opaque channels %q %q", a, b)
	}
	if got := OpaqueConvID("Local/0612345678@from-internal-0000002a;1>PJSIP/trunk-0000000a"); got != a+">"+b {
		t.Errorf("conv id %q", got)
	}
	if got := OpaqueConvID(">PJSIP/trunk-0000000a"); got != ">"+b || !IsOpaque(got) || !IsOpaque(a) || IsOpaque("PJSIP/201-1>") {
		t.Errorf("one-sided conv id %q", got)
	}
	if OpaqueChannel("") != "" || OpaqueConvID("") != "" {
		t.Error("empty names")
	}
	if got := string(Opaquer{}.AppendChannel([]byte("x"), "PJSIP/trunk-0000000a")); got != "x"+b {
		t.Errorf("Opaquer %q", got)
	}
}
