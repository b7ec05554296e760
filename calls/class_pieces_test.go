package calls

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// testOpaquer marks channel names visibly (the real one is auth's keyed
// hash).
type testOpaquer struct{}

func (testOpaquer) AppendChannel(b []byte, name string) []byte {
	if name == "" {
		return b
	}
	return append(append(b, "~op-"...), strconv.Itoa(len(name))...)
}

// TestExtensionsForAcrossChanges: the collection a filtered reader gets
// (the hidden pieces cut around the extensions it sees in full) is, after
// each of a series of changes, new extensions included, exactly each
// extension's JSON in the class the reader has, in key order; pieces
// reused from an earlier snapshot keep their offsets right.
func TestExtensionsForAcrossChanges(t *testing.T) {
	names := map[string]string{}
	for i := range 2500 {
		names[strconv.Itoa(10000+2*i)] = "X"
	}
	now := time.UnixMilli(1796028600000)
	e := New(Config{Names: names, Opaque: testOpaquer{}, Now: func() time.Time { return now }})
	s := e.Publish()
	ev := func(kv ...string) ami.Message {
		h := make([]ami.Header, 0, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			h = append(h, ami.Header{Key: kv[i], Value: kv[i+1]})
		}
		return ami.NewMessage(h...)
	}
	fulls := [][]string{nil, {"10000"}, {"10002", "12046", "12048", "14998"}, {"14998", "10000", "10000"}, {"99999"}}
	for step := range 12 {
		for _, full := range fulls {
			want := []byte{'{'}
			sees := map[string]bool{}
			for _, k := range full {
				sees[k] = true
			}
			for i, k := range s.Extensions.Keys() {
				if i > 0 {
					want = append(want, ',')
				}
				c := NumbersHidden
				if sees[k] {
					c = Full
				}
				want = appendString(want, k)
				want = append(want, ':')
				want = append(want, s.ExtensionJSONAs(k, c)...)
			}
			want = append(want, '}')
			if got := joinPieces(s.ExtensionsFor(full)); string(got) != string(want) {
				t.Fatalf("step %d, full %v: collection differs (%d bytes, want %d)", step, full, len(got), len(want))
			}
		}
		if got := joinPieces(s.ExtensionsParts()); !slices.Equal(got, s.ExtensionsJSON()) {
			t.Fatalf("step %d: full pieces differ", step)
		}
		// One change per step, in a different piece each time; every
		// third step a new extension moves the keys after it.
		x := strconv.Itoa(10000 + 2*((step*700)%2500))
		if step%3 == 2 {
			x = fmt.Sprint(10001 + 2*step*300)
		}
		e.Apply(ev("Event", "ExtensionStatus", "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", strconv.Itoa(8*(step%2)), "StatusText", "x"))
		now = now.Add(time.Second)
		s = e.Publish()
	}
	if s.Extensions.Len() <= 2500 {
		t.Fatalf("no extension was added (%d)", s.Extensions.Len())
	}
}

// TestHiddenClassIsLazy: Publish makes no NumbersHidden bytes; the first
// reader that asks makes them once, and the feed's change, the snapshot
// and the next snapshots (while the entity is unchanged) share them.
func TestHiddenClassIsLazy(t *testing.T) {
	e := New(Config{Names: map[string]string{"201": "A", "202": "B"}, Opaque: testOpaquer{}})
	s := e.Publish()
	for _, k := range s.Extensions.Keys() {
		if x := s.Extensions.ent(k); x.hid != nil || x.full == nil {
			t.Fatalf("%s: hidden bytes made at Publish", k)
		}
	}
	cs, _ := e.Feed().Since(0)
	var ch *Change
	for i := range cs {
		if cs[i].Type == ExtenUpdate && cs[i].Key == "201" {
			ch = &cs[i]
		}
	}
	if ch == nil {
		t.Fatal("no extenUpdate for 201")
	}
	h := ch.JSON(NumbersHidden)
	if h == nil || &h[0] != &s.ExtensionJSONAs("201", NumbersHidden)[0] {
		t.Fatal("the change and the snapshot do not share the hidden bytes")
	}
	e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "ExtensionStatus"}, ami.Header{Key: "Exten", Value: "202"},
		ami.Header{Key: "Context", Value: "from-internal"}, ami.Header{Key: "Hint", Value: "PJSIP/202"}, ami.Header{Key: "Status", Value: "8"}, ami.Header{Key: "StatusText", Value: "Ringing"}))
	s2 := e.Publish()
	if s2 == s {
		t.Fatal("nothing published")
	}
	if &s2.ExtensionJSONAs("201", NumbersHidden)[0] != &h[0] {
		t.Error("an unchanged extension's hidden bytes were made again")
	}
	if s2.Extensions.ent("202").hid != nil {
		t.Error("the changed extension's hidden bytes were made at Publish")
	}
}

// TestSupersededChangeLetsGo: a feed change keeps its entity reachable
// only while it is the entity's latest (a duration refresh does not count
// as a change); once the entity changes again, the older change's hidden
// JSON is nil (readers skip it for the newer one) and the feed no longer
// holds the old value.
func TestSupersededChangeLetsGo(t *testing.T) {
	now := time.UnixMilli(1796028600000)
	e := New(Config{Names: map[string]string{"201": "A"}, Opaque: testOpaquer{}, Now: func() time.Time { return now }})
	e.Publish()
	status := func(s string) {
		e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "ExtensionStatus"}, ami.Header{Key: "Exten", Value: "201"},
			ami.Header{Key: "Context", Value: "from-internal"}, ami.Header{Key: "Hint", Value: "PJSIP/201"}, ami.Header{Key: "Status", Value: s}, ami.Header{Key: "StatusText", Value: "x"}))
		now = now.Add(time.Second)
		e.Publish()
	}
	last := func() Change {
		cs, _ := e.Feed().Since(0)
		for i := len(cs) - 1; i >= 0; i-- {
			if cs[i].Type == ExtenUpdate {
				return cs[i]
			}
		}
		t.Fatal("no extenUpdate")
		return Change{}
	}
	status("8")
	first := last()
	if first.JSON(NumbersHidden) == nil {
		t.Fatal("the latest change has no hidden JSON")
	}
	e.RefreshDurations()
	if first.JSON(NumbersHidden) == nil {
		t.Fatal("a duration refresh cut the latest change")
	}
	status("0")
	if got := first.JSON(NumbersHidden); got != nil {
		t.Errorf("superseded change still reaches its entity: %s", got)
	}
	if second := last(); second.JSON(NumbersHidden) == nil || string(second.JSON(Full)) != string(second.Data) {
		t.Error("the newer change lost its JSON")
	}
}
