package calls

import (
	"strconv"
	"testing"
)

// TestTombstones: the last n uids added are remembered, older ones
// forgotten in the order added; adding a uid remembered already changes
// nothing (add finds it by its insert: the set does not grow).
func TestTombstones(t *testing.T) {
	tb := newTombstones(3)
	for _, u := range []string{"a", "b", "a", "c", "b", ""} {
		tb.add(u)
	}
	for _, u := range []string{"a", "b", "c"} {
		if !tb.has(u) {
			t.Errorf("%s forgotten among the last 3", u)
		}
	}
	if tb.has("") || len(tb.set) != 3 {
		t.Errorf("set %v, want a b c", tb.set)
	}
	tb.add("d") // a goes
	tb.add("e") // b goes
	for u, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if tb.has(u) != want {
			t.Errorf("has(%s) = %v, want %v", u, !want, want)
		}
	}
	for i := range 10 {
		tb.add(strconv.Itoa(i))
	}
	if len(tb.set) != 3 || !tb.has("7") || !tb.has("8") || !tb.has("9") {
		t.Errorf("set %v, want 7 8 9", tb.set)
	}
}
