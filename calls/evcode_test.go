package calls

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// TestEvCodes: each name of evNames has its code, and every other name
// (the other events of ami's list, other cases, near misses) has evOther.
func TestEvCodes(t *testing.T) {
	// Each code's name is its identifier's: evHangup is "Hangup".
	own, err := os.ReadFile("evcode.go")
	if err != nil {
		t.Fatal(err)
	}
	block := string(own)[strings.Index(string(own), "evOther evCode = iota"):strings.Index(string(own), "nEvCodes\n)")]
	ids := regexp.MustCompile(`(?m)^\tev(\w+)$`).FindAllStringSubmatch(block, -1)
	if len(ids) != int(nEvCodes)-1 {
		t.Fatalf("%d codes in evcode.go's list, %d in evNames", len(ids), nEvCodes-1)
	}
	for i, id := range ids {
		if evNames[i+1] != id[1] {
			t.Errorf("code ev%s is named %q", id[1], evNames[i+1])
		}
	}
	named := map[string]bool{}
	for c := evOther + 1; c < nEvCodes; c++ {
		n := evNames[c]
		if n == "" || named[n] {
			t.Fatalf("code %d: name %q empty or twice", c, n)
		}
		named[n] = true
		if got := evCodeOf(n); got != c {
			t.Errorf("evCodeOf(%q) = %d, want %d", n, got, c)
		}
	}
	src, err := os.ReadFile("../ami/names.go")
	if err != nil {
		t.Fatal(err)
	}
	others := []string{"", "H", "Ha", "Hangu", "Hangupx", "hangup", "HANGUP", "Newchannel ", " Newchannel", "NewChannel",
		"QueueMemberStatuS", "DialEnd\x00", "Cdr\u212A"}
	for _, m := range regexp.MustCompile(`Event\w+ += "(\w+)"`).FindAllStringSubmatch(string(src), -1) {
		others = append(others, m[1], strings.ToLower(m[1]), m[1][:len(m[1])-1], m[1]+"s")
	}
	for _, n := range others {
		if named[n] {
			continue
		}
		if got := evCodeOf(n); got != evOther {
			t.Errorf("evCodeOf(%q) = %d (%q), want evOther", n, got, evNames[got])
		}
	}
}

// TestStatsByType: the counters by name are what the events were, the
// names with a code or not, also when the first of a coded name comes
// after maxTypes others have filled the map (it is then not counted, as
// any new name).
func TestStatsByType(t *testing.T) {
	e := New(Config{})
	want := map[string]uint64{}
	events := uint64(1)
	apply := func(name string) {
		events++
		e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: name}))
		if _, ok := want[name]; ok || len(want) < maxTypes {
			want[name]++
		}
	}
	for i := range 3 {
		apply(ami.EventNewexten)
		apply("Junk" + strconv.Itoa(i))
		apply(ami.EventVarSet)
	}
	apply(ami.EventHangup)
	e.Apply(ami.NewMessage(ami.Header{Key: "event", Value: ami.EventHangup})) // any case of the key
	want[ami.EventHangup]++
	for i := 0; len(want) < maxTypes; i++ {
		apply("Filler" + strconv.Itoa(i))
	}
	apply(ami.EventCdr) // one name too many: never counted
	apply(ami.EventCdr)
	apply(ami.EventNewexten)
	apply("Junk1")
	got := e.Stats()
	if len(got.ByType) != len(want) {
		t.Errorf("%d names counted, want %d", len(got.ByType), len(want))
	}
	for n, c := range want {
		if got.ByType[n] != c {
			t.Errorf("ByType[%q] = %d, want %d", n, got.ByType[n], c)
		}
	}
	if got.Events != events {
		t.Errorf("Events = %d, want %d", got.Events, events)
	}
}
