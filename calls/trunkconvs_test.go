package calls

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// A trunk's conversation that shows an extension's number without being
// linked with any of its channels (the outside caller was put through to
// 2001 and 2001's leg is gone: the connected line still says 2001) is
// re-derived when 2001 is renamed, though none of the trunk's channels
// was touched (markShowing drops the trunk's kept conversations).
func TestTrunkConversationFollowsRename(t *testing.T) {
	now := time.Unix(1796028439, 0)
	e := New(Config{Now: func() time.Time { return now }})
	e.Apply(ev("EndpointDetail", "ObjectType", "endpoint", "ObjectName", "2001", "Callerid", `"Ann" <2001>`))
	e.Apply(ev("Newchannel", "Channel", "PJSIP/trunk-00000001", "ChannelState", "6", "CallerIDNum", "0611111111",
		"CallerIDName", "<unknown>", "ConnectedLineNum", "2001", "ConnectedLineName", "<unknown>", "Context", "from-trunk",
		"Exten", "600", "Uniqueid", "1.1", "Linkedid", "1.1"))
	name := func() string {
		t.Helper()
		for _, cv := range e.Publish().Trunks.Get("trunk").Conversations.All() {
			return cv.CounterpartName
		}
		t.Fatal("the trunk has no conversation")
		return ""
	}
	if n := name(); n != "Ann" {
		t.Fatalf("counterpart %q, want Ann", n)
	}
	e.Apply(ev("EndpointDetail", "ObjectType", "endpoint", "ObjectName", "2001", "Callerid", `"Bea" <2001>`))
	if n := name(); n != "Bea" {
		t.Errorf("after the rename, counterpart %q, want Bea", n)
	}
}

// An outside caller forwarded to a cellphone has both legs on the trunk:
// the inbound leg and the outbound one derive the one conversation
// "<inbound>><outbound>". The recording of an inbound DID call
// (inbound_trunk_did: the trunk's leg bridged with 202's), with 202's leg
// made an outbound leg on the trunk, replayed in batches of random size:
// after every Publish the trunk is what its derivation in full gives
// (checkFull), and Publish keeps the trunk's fast path (no derivation in
// full once the call is up: the shared id is followed per channel).
func TestTrunkInTrunkOut(t *testing.T) {
	rec := loadRecording(t, "inbound_trunk_did")
	const in, out = "PJSIP/202-0000003d", "PJSIP/trunk-0000003e"
	var msgs []ami.Message
	for _, m := range rec.msgs {
		hs := m.Headers()
		for i := range hs {
			hs[i].Value = strings.ReplaceAll(hs[i].Value, in, out)
		}
		msgs = append(msgs, ami.NewMessage(hs...))
	}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 7))
		var clk StreamClock
		e := New(testConfig(clk.Now))
		both, fullAt := false, -1
		for i := 0; i < len(msgs); {
			n := 1 + r.IntN(6)
			for _, m := range msgs[i:min(i+n, len(msgs))] {
				clk.Observe(m)
				e.Apply(m)
			}
			i += n
			e.Publish()
			checkFull(t, e, fmt.Sprintf("seed %d, message %d", seed, i))
			tr := e.trunks["trunk"]
			if tr == nil {
				continue
			}
			if len(tr.conv.more) > 0 && !both {
				both, fullAt = true, tr.conv.full
			}
			if both && tr.conv.full != fullAt {
				t.Fatalf("seed %d, message %d: the trunk was derived in full %d times since both legs showed the call", seed, i, tr.conv.full-fullAt)
			}
		}
		if !both {
			t.Fatalf("seed %d: never both legs on the trunk with one conversation", seed)
		}
		if n := e.Snapshot().Trunks.Get("trunk").Conversations.Len(); n != 0 {
			t.Errorf("seed %d: %d conversations left on the trunk", seed, n)
		}
	}
}

// TestTrunkShownItems runs the call centre's mix in batches of random size
// and checks after every Publish that each trunk's owner map holds an entry
// for every conversation the trunk shows, and that the item an entry keeps
// (put compares with it instead of searching the ConvMap) is the one the
// trunk shows.
func TestTrunkShownItems(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	r := rand.New(rand.NewPCG(3, 8))
	kept := 0
	inBatches(e, m.stream(8000), r, func(i, _ int) {
		e.Publish()
		for k, tr := range e.trunks {
			tc := &tr.conv
			if !tc.valid {
				continue
			}
			for it := range tc.w.m.items {
				if tc.owner[it.cv.ID].c == nil {
					t.Fatalf("event %d: trunk %s shows %s, which has no owner", i, k, it.cv.ID)
				}
			}
			for id, s := range tc.owner {
				if s.it == nil {
					continue
				}
				if got := tc.w.m.item(id); got != s.it {
					t.Fatalf("event %d: trunk %s: %s keeps an item the trunk does not show", i, k, id)
				}
				kept++
			}
		}
	})
	if kept == 0 {
		t.Error("no owner entry kept its item")
	}
}

// A trunk delta of a few conversations set and removed allocates itself
// and its JSON, not its lists of what changed as they grow (setBuf,
// removedBuf).
func TestTrunkDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	conv := func(id string) Conversation {
		return Conversation{ID: id, CounterpartNum: "0611111111", Direction: "in"}
	}
	old := ConvMapOf(map[string]Conversation{"a": conv("a"), "b": conv("b"), "c": conv("c"), "d": conv("d"), "e": conv("e")})
	var w convWriter
	w.begin(old)
	for _, id := range []string{"b", "x", "y", "z"} {
		w.set(newConvItem(conv(id)))
	}
	for _, id := range []string{"a", "c", "d", "e"} {
		w.del(id)
	}
	v := Trunk{Name: "trunk", Status: "busy", Conversations: w.m}
	var d *trunkDelta
	n := testing.AllocsPerRun(100, func() { d = newTrunkDelta(old, &v, 0, nil, nil) })
	if len(d.set) != 4 || len(d.removed) != 4 {
		t.Fatalf("set %d, removed %d: want 4 and 4", len(d.set), len(d.removed))
	}
	if n > 2 {
		t.Errorf("%.0f allocations a delta, want 2 (the delta, its JSON)", n)
	}
}

// A snapshot's trunks are read from its trunk entities (TrunkMap): a
// snapshot held across later Publishes still shows the trunks it showed
// (fails with setTrunk writing the entities' map in place).
func TestTrunkSnapshotsKept(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	r := rand.New(rand.NewPCG(5, 23))
	type heldTrunk struct {
		s     *Snapshot
		v     Trunk
		convs map[string]Conversation
		at    int
	}
	var held []heldTrunk
	pubs, changed := 0, 0
	var last *Snapshot
	inBatches(e, m.stream(8000), r, func(i, _ int) {
		s := e.Publish()
		pubs++
		if cur := s.Trunks.Get("trunk").Conversations; last != nil && !cur.equal(last.Trunks.Get("trunk").Conversations) {
			changed++
		}
		last = s
		for _, h := range held {
			v, ok := h.s.Trunks.Lookup("trunk")
			if !ok || h.s.Trunks.Len() != 1 || !trunkFieldsEqual(&v, &h.v) || !maps.EqualFunc(v.Conversations.Map(), h.convs, convEqual) {
				t.Fatalf("event %d: the trunk of the snapshot held at event %d changed", i, h.at)
			}
		}
		if pubs%10 == 0 {
			v := s.Trunks.Get("trunk")
			held = append(held, heldTrunk{s: s, v: v, convs: v.Conversations.Map(), at: i})
		}
	})
	if len(held) < 5 || changed < len(held) {
		t.Fatalf("%d snapshots held, the trunk changed in %d Publishes: want more", len(held), changed)
	}
}

// A trunk's entity, its JSON made on first need, is one allocation
// (newLazyEnt: the entity and its lazy whole together).
func TestLazyEntAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	v := Trunk{Name: "trunk", Status: "busy"}
	var x *ent[Trunk]
	if n := testing.AllocsPerRun(100, func() { x = newLazyEnt(v, 0, nil, appendTrunk) }); n != 1 {
		t.Errorf("%.0f allocations, want 1", n)
	}
	if x.whole == nil || x.v.Name != "trunk" {
		t.Fatalf("entity %+v", x)
	}
}
