package calls

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// checkExtPub: each extension's entity as the engine keeps it
// (extState.pub, what Publish compares its view with) is the one the
// published ExtensionMap holds, and every extension published has one.
func checkExtPub(t *testing.T, e *Engine, where string) {
	t.Helper()
	for k, x := range e.exts {
		if got, want := x.pub, e.pub.exts.cur.ent(k); got != want {
			t.Fatalf("%s: extension %s keeps entity %p, the map holds %p", where, k, got, want)
		}
	}
	if n := e.pub.exts.cur.Len(); n > len(e.exts) {
		t.Fatalf("%s: %d extensions published, %d known", where, n, len(e.exts))
	}
}

// TestShowersCount: the index of the numbers shown counts one extension
// in its slot and two or more in a map, and forgets a number no
// extension shows any more, whatever the order of counts and uncounts.
func TestShowersCount(t *testing.T) {
	w := newExtWriter()
	want := map[string]map[string]int{}
	step := func(n, k string, d int) {
		t.Helper()
		w.count(n, k, d)
		if want[n] == nil {
			want[n] = map[string]int{}
		}
		if want[n][k] += d; want[n][k] <= 0 {
			delete(want[n], k)
		}
		if len(want[n]) == 0 {
			delete(want, n)
		}
		if got := w.showCounts(); !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("after %s %s %+d: index %v, want %v", n, k, d, got, want)
		}
		got := slices.Sorted(w.showing(n))
		if keys := slices.Sorted(maps.Keys(want[n])); !slices.Equal(got, keys) {
			t.Fatalf("after %s %s %+d: showing %v, want %v", n, k, d, got, keys)
		}
	}
	step("0612", "201", 1)
	step("0612", "201", 1)  // twice by one
	step("0612", "202", -1) // uncounting one that does not show it: nothing
	step("0612", "202", 1)  // a second: the map
	step("0612", "203", 1)
	step("0612", "201", -2)
	step("0612", "202", -1)
	step("0612", "203", -1) // none left: forgotten
	step("0612", "204", -1)
	step("0613", "201", 1)
	step("0613", "201", -1)
	for range w.showing("0612") {
		t.Fatal("a forgotten number still shows")
	}
	// showing stops when told to.
	step("0614", "201", 1)
	step("0614", "202", 1)
	n := 0
	for range w.showing("0614") {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("showing yielded %d after break", n)
	}
}

// TestExtViewKeepsPublished: an extension whose conversations the batch
// left as they were (its status changed) is viewed with the published
// map itself; one whose call changed gets a new map. Either way the view
// equals one derived afresh.
func TestExtViewKeepsPublished(t *testing.T) {
	e, s := scaleEngine(t, 20, 4)
	busy := e.Publish().Extensions.Get(scaleExten(0))
	if len(busy.Conversations) != 1 {
		t.Fatalf("2000 has %d conversations, want 1", len(busy.Conversations))
	}
	x := e.exts[scaleExten(0)]
	v, kept := e.extView(x, busy.Conversations)
	if !kept || !sameMap(v.Conversations, busy.Conversations) {
		t.Fatalf("unchanged call: kept %v, same map %v", kept, sameMap(v.Conversations, busy.Conversations))
	}
	// The same conversation changed: a new map.
	changed := maps.Clone(busy.Conversations)
	for id, cv := range changed {
		cv.Connected = !cv.Connected
		changed[id] = cv
	}
	if v, kept := e.extView(x, changed); kept || sameMap(v.Conversations, changed) {
		t.Fatal("a changed conversation kept the published map")
	}
	// One more or one less: a new map.
	if v, kept := e.extView(x, nil); kept || v.Conversations == nil {
		t.Fatalf("no published conversations: kept %v, %v", kept, v.Conversations)
	}
	two := maps.Clone(busy.Conversations)
	two["x>y"] = Conversation{ID: "x>y"}
	if _, kept := e.extView(x, two); kept {
		t.Fatal("a published conversation more was kept")
	}
	// A channel listed twice or nine times derives one conversation more
	// than once: convsAre cannot tell, the map made is compared and the
	// published one kept (publishExts does not compare again).
	for _, n := range []int{2, 9} {
		chans := slices.Repeat(x.chans[:1], n)
		if m, kept := e.extConvs(chans, busy.Conversations); !kept || !sameMap(m, busy.Conversations) {
			t.Fatalf("one channel %d times: kept %v, same map %v", n, kept, sameMap(m, busy.Conversations))
		}
		if _, kept := e.extConvs(chans, changed); kept {
			t.Fatalf("one channel %d times kept a changed conversation", n)
		}
	}
	// No channels: nil, as before, kept when none were published.
	idle := e.exts[scaleExten(19)]
	if v, kept := e.extView(idle, nil); !kept || v.Conversations != nil {
		t.Fatalf("idle: kept %v, %v", kept, v.Conversations)
	}
	if _, kept := e.extView(idle, busy.Conversations); kept {
		t.Fatal("idle kept a call")
	}
	// Through Publish: a status change alone keeps the map; the bytes
	// are those encoded afresh.
	e.Apply(scaleEv("ExtensionStatus", "Exten", scaleExten(0), "Context", "from-internal", "Status", "8", "StatusText", "Ringing"))
	got := e.Publish().Extensions.Get(scaleExten(0))
	if got.Status != "ringing" || !sameMap(got.Conversations, busy.Conversations) {
		t.Fatalf("status change: %q, same map %v", got.Status, sameMap(got.Conversations, busy.Conversations))
	}
	checkFull(t, e, "status change")
	for _, m := range s.end() {
		e.Apply(m)
	}
	e.Publish()
	checkFull(t, e, "call ended")
}

// TestConvsAre: d holds prev's conversations only when as many, of
// distinct ids, each equal.
func TestConvsAre(t *testing.T) {
	a, b := Conversation{ID: "a>"}, Conversation{ID: "b>"}
	prev := map[string]Conversation{"a>": a, "b>": b}
	xa := a
	xa.Extra = &ConvExtra{Parked: Parked{Parking: "701"}}
	// sure: whether the answer holds for the map d makes (true: the
	// published extension is not compared again, so a wrong "sure" would
	// announce an unchanged extension or keep a changed one).
	for _, c := range []struct {
		d          []Conversation
		want, sure bool
	}{
		{[]Conversation{a, b}, true, true},
		{[]Conversation{b, a}, true, true},
		{[]Conversation{a, a}, false, true}, // as many, an id twice: a smaller map
		{[]Conversation{a}, false, true},
		{[]Conversation{a, b, b}, false, false}, // an id twice may make prev's map
		{[]Conversation{xa, b}, false, true},
		{nil, false, true},
	} {
		if got, sure := convsAre(prev, c.d); got != c.want || sure != c.sure {
			t.Errorf("convsAre(%v) = %v, %v, want %v, %v", c.d, got, sure, c.want, c.sure)
		}
	}
	if got, sure := convsAre(map[string]Conversation{"a>": a}, []Conversation{a, a}); got || sure {
		t.Error("two of one id sure to differ from one")
	}
	if got, sure := convsAre(map[string]Conversation{}, nil); !got || !sure {
		t.Error("none and none differ")
	}
	many := map[string]Conversation{}
	var d []Conversation
	for i := range 9 {
		cv := Conversation{ID: fmt.Sprint(i, ">")}
		many[cv.ID], d = cv, append(d, cv)
	}
	if got, sure := convsAre(many, d); got || sure {
		t.Error("nine conversations compared pairwise")
	}
}

// TestAppendConversationsSorted: the conversations object is in id
// order whatever how many there are (one, a few on the stack, more).
func TestAppendConversationsSorted(t *testing.T) {
	for _, n := range []int{0, 1, 2, 8, 9, 30} {
		m := map[string]Conversation{}
		for i := range n {
			cv := Conversation{ID: fmt.Sprintf("PJSIP/%d-x>", (i*7919)%1000), AnsweredAt: 1000, Direction: "in"}
			m[cv.ID] = cv
		}
		want := []byte{'{'}
		for i, id := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				want = append(want, ',')
			}
			cv := m[id]
			want = appendConvEntry(want, id, &cv, 5000, enc{})
		}
		want = append(want, '}')
		if got := appendConversations(nil, m, 5000, enc{}); !bytes.Equal(got, want) {
			t.Errorf("%d conversations:\n%s\nwant\n%s", n, got, want)
		}
	}
}

// TestPresenceChangeAnnounced: userPresenceUpdate is announced when DND or
// the forward change what the user chose, and not for a change of the
// phone's status or of a forward that leaves the choice as it was.
func TestPresenceChangeAnnounced(t *testing.T) {
	e := New(Config{Cellphones: map[string]string{"201": "3331234567"}})
	e.SetLink(LinkLive)
	seq := e.Publish().Seq
	step := func(what, want string, ms ...any) {
		t.Helper()
		for _, m := range ms {
			switch m := m.(type) {
			case [3]string:
				e.Apply(event("DBGetResponse", "Family", m[0], "Key", m[1], "Val", m[2]))
			case string:
				e.Apply(event("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Status", m, "StatusText", ""))
			}
		}
		s := e.Publish()
		ch, _ := e.Feed().Since(seq)
		seq = s.Seq
		var got []string
		for _, c := range ch {
			if c.Type == UserPresenceUpdate {
				got = append(got, string(c.Data))
			}
		}
		var w []string
		if want != "" {
			x, p, _ := strings.Cut(want, " ")
			w = []string{`{"exten":"` + x + `","status":"` + p + `"}`}
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: presence updates %q, want %q", what, got, w)
		}
	}
	step("new and online", "", "0")
	step("busy", "", "1")
	step("dnd on", "201 dnd", [3]string{"DND", "201", "YES"})
	step("offline with dnd", "", "4")
	step("dnd off", "201 online", [3]string{"DND", "201", ""})
	step("forward", "201 callforward", [3]string{"CF", "201", "202"})
	step("forward elsewhere", "", [3]string{"CF", "201", "203"})
	step("forward to the cellphone", "201 cellphone", [3]string{"CF", "201", "3331234567"})
	step("forward to voicemail", "201 voicemail", [3]string{"CF", "201", "vmu201"})
	step("busy forward changed", "", [3]string{"CFB", "201", "204"})
	step("forward off", "201 online", [3]string{"CF", "201", ""})
	step("new extension, dnd", "202 dnd", [3]string{"DND", "202", "YES"})
}

// TestUnchangedNotAnnounced: an extension the batch marked but left as
// it was is not announced again, whether its conversations are compared
// in place (a few) or as maps (more than convsAre compares pairwise).
func TestUnchangedNotAnnounced(t *testing.T) {
	for _, n := range []int{1, 9} {
		e, _ := scaleEngine(t, 4, 0)
		for i := range n {
			e.Apply(scaleChanEv("Newchannel", fmt.Sprintf("PJSIP/2000-%d", i), "2000", "<unknown>", "3", fmt.Sprint("17.", i), fmt.Sprint("17.", i), 4))
		}
		s := e.Publish()
		if got := len(s.Extensions.Get("2000").Conversations); got != n {
			t.Fatalf("%d calls: %d conversations", n, got)
		}
		// A channel touched, nothing shown changed.
		e.changed(e.byName["PJSIP/2000-0"])
		if s2 := e.Publish(); s2.Seq != s.Seq {
			ch, _ := e.Feed().Since(s.Seq)
			t.Errorf("%d calls: unchanged extension announced: %d changes, first %s %s", n, len(ch), ch[0].Type, ch[0].Data)
		}
	}
}

// TestExtWriterSetOld: set finds the entry it replaces by the old entity,
// whichever of a shard's extensions it is, in a shard shared with the
// published map (copied) or of this Publish (in place); the others and
// the index of numbers shown stay right. An entity not in the map (nil,
// or one never stored) falls back to the search by number.
func TestExtWriterSetOld(t *testing.T) {
	var same []string // numbers of one shard
	for i := 200; len(same) < 4; i++ {
		if k := fmt.Sprint(i); shardOf(k) == shardOf("200") {
			same = append(same, k)
		}
	}
	slices.Sort(same)
	showing := func(k, num string) *ent[Extension] {
		v := Extension{Exten: k}
		if num != "" {
			v.Conversations = map[string]Conversation{k + ">": {ID: k + ">", CounterpartNum: num}}
		}
		return &ent[Extension]{v: v}
	}
	w := newExtWriter()
	held := map[string]*ent[Extension]{}
	for _, k := range same {
		w.begin()
		x := showing(k, "0"+k)
		w.set(k, x, nil)
		held[k] = x
	}
	check := func(where string) {
		t.Helper()
		for _, k := range same {
			if got := w.cur.ent(k); got != held[k] {
				t.Fatalf("%s: %s holds %+v, want %+v", where, k, got.v, held[k].v)
			}
		}
		if got := w.cur.Keys(); !slices.Equal(got, same) {
			t.Fatalf("%s: keys %v, want %v", where, got, same)
		}
		want := map[string]map[string]int{}
		for k, x := range held {
			for _, cv := range x.v.Conversations {
				want[cv.CounterpartNum] = map[string]int{k: 1}
			}
		}
		if got := w.showCounts(); !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("%s: index %v, want %v", where, got, want)
		}
	}
	check("stored")
	for round := range 2 {
		w.begin() // round 0: the shard is shared, then its copy is written in place
		for i := len(same) - 1; i >= 0; i-- {
			k := same[i]
			x := showing(k, fmt.Sprint("1", round, k))
			if i%2 == 1 {
				x = showing(k, "")
			}
			w.set(k, x, held[k])
			held[k] = x
			check(fmt.Sprintf("round %d, %s replaced", round, k))
		}
	}
	w.begin()
	k := same[1]
	x := showing(k, "9"+k)
	w.set(k, x, showing(k, "")) // not the stored entity: searched by number
	held[k] = x
	check("replaced with a stale old")
}

// TestJoinID: a conversation's id is the one derived last (the same
// string, no new one) when it is unchanged, else the new id.
func TestJoinID(t *testing.T) {
	last := strings.Clone("PJSIP/201-1>PJSIP/202-2")
	for _, c := range []struct {
		a, b, last, want string
		kept             bool
	}{
		{"PJSIP/201-1", "PJSIP/202-2", last, last, true},
		{"PJSIP/202-2", "PJSIP/201-1", last, "PJSIP/202-2>PJSIP/201-1", false}, // swapped
		{"PJSIP/201-1", "PJSIP/203-3", last, "PJSIP/201-1>PJSIP/203-3", false},
		{"PJSIP/201-1>", "PJSIP/202-2", last, "PJSIP/201-1>>PJSIP/202-2", false},
		{"PJSIP/201-1", "PJSIP/202-", last, "PJSIP/201-1>PJSIP/202-", false},
		{"", "", "", ">", false},
	} {
		got := joinID(c.a, c.b, c.last)
		if kept := unsafe.StringData(got) == unsafe.StringData(c.last); got != c.want || kept != c.kept {
			t.Errorf("joinID(%q, %q, %q) = %q (the last: %v), want %q (%v)", c.a, c.b, c.last, got, kept, c.want, c.kept)
		}
	}
}
