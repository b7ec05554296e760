package ami_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// naiveLookup is Lookup's contract written plainly: the first header of
// exactly that key, else the first equal to it under Unicode case folding.
func naiveLookup(m ami.Message, key string) (string, bool) {
	for i := range m.Len() {
		if h := m.Header(i); h.Key == key {
			return h.Value, true
		}
	}
	for i := range m.Len() {
		if h := m.Header(i); strings.EqualFold(h.Key, key) {
			return h.Value, true
		}
	}
	return "", false
}

// TestLookupIsNaive compares Lookup with naiveLookup on messages of keys
// drawn from a few names in mixed case (last byte included), repeated,
// some holding a Kelvin sign or a long s (in a key, or only in a value),
// looked up by those names in mixed case and by names absent.
func TestLookupIsNaive(t *testing.T) {
	names := []string{"Channel", "Context", "Uniqueid", "Linkedid", "ActionID", "Exten", "Key", "Dest", "Mask", "X", ""}
	r := rand.New(rand.NewPCG(7, 11))
	mixCase := func(s string) string { return flipCase(r, s, 3) }
	odd := func(s string) string {
		switch r.IntN(12) {
		case 0:
			return strings.Replace(strings.Replace(s, "k", "\u212A", 1), "K", "\u212A", 1)
		case 1:
			return strings.Replace(strings.Replace(s, "s", "\u017F", 1), "S", "\u017F", 1)
		}
		return s
	}
	for range 5000 {
		var hs []ami.Header
		for j := range r.IntN(10) {
			k := names[r.IntN(len(names))]
			if r.IntN(2) == 0 {
				k = mixCase(k)
			}
			v := string(rune('a' + j))
			if r.IntN(15) == 0 {
				v = odd("sk") // a rune folding to ASCII in a value only
			}
			hs = append(hs, ami.Header{Key: odd(k), Value: v})
		}
		m := ami.NewMessage(hs...)
		for _, k := range names {
			for _, key := range []string{k, mixCase(k), strings.ToUpper(k), odd(k), k + "s"} {
				v, ok := m.Lookup(key)
				if wv, wok := naiveLookup(m, key); v != wv || ok != wok {
					t.Fatalf("Lookup(%q) in %q = %q, %v; want %q, %v", key, m.Headers(), v, ok, wv, wok)
				}
			}
		}
	}
}

// TestKind checks Kind against its first header's key only: Kind reads
// the key "Event" straight from the text's start, so a text starting
// "Event" whose first key is something else (longer, empty) must not say
// event.
func TestKind(t *testing.T) {
	for _, c := range []struct {
		m    ami.Message
		want ami.Kind
	}{
		{ami.NewMessage(), ami.KindUnknown},
		{ami.NewMessage(ami.Header{Key: "Event", Value: "Hangup"}), ami.KindEvent},
		{ami.NewMessage(ami.Header{Key: "eVENT", Value: "Hangup"}), ami.KindEvent},
		{ami.NewMessage(ami.Header{Key: "Event", Value: ""}), ami.KindEvent},
		{ami.NewMessage(ami.Header{Key: "Eventful", Value: "x"}), ami.KindUnknown},
		{ami.NewMessage(ami.Header{Key: "Even", Value: "tX"}), ami.KindUnknown},
		{ami.NewMessage(ami.Header{Key: "", Value: "Event"}), ami.KindUnknown},
		{ami.NewMessage(ami.Header{Key: "Response", Value: "Success"}), ami.KindResponse},
		{ami.NewMessage(ami.Header{Key: "action", Value: "Ping"}), ami.KindAction},
		{ami.NewMessage(ami.Header{Key: "X", Value: "1"}, ami.Header{Key: "Event", Value: "Hangup"}), ami.KindUnknown},
	} {
		if got := c.m.Kind(); got != c.want {
			t.Errorf("%v: Kind %v, want %v", c.m, got, c.want)
		}
	}
}
