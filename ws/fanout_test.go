package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestFilterMatchesView checks that what the hub sends each kind of user,
// in events and in snapshots, is byte for byte what auth.ViewOf(user)
// makes of the state: the filter REST applies.
func TestFilterMatchesView(t *testing.T) {
	users := testUsers(t)
	for _, rec := range []string{"basic_call_caller_hangup", "queue_answered", "park_retrieve", "inbound_trunk_did", "attended_transfer_atxfer"} {
		t.Run(rec, func(t *testing.T) {
			eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
			h := bareHub(t, eng, users)
			conns := map[string]*conn{}
			for _, u := range users.All() {
				conns[u.Username] = h.addFake(u, allTopics)
				d := h.addFake(u, allTopics) // trunks and queues as deltas
				d.deltas = deltaAll
				conns[u.Username+" (deltas)"] = d
			}
			checked := 0
			for _, msg := range loadRecording(t, rec) {
				eng.Apply(msg)
				s := eng.Publish()
				cs, _ := eng.Feed().Since(h.last)
				h.fanout(cs)
				h.last = s.Seq
				for name, c := range conns {
					v := auth.ViewOf(c.user)
					for _, f := range c.take() {
						var ev struct {
							Type string
							Seq  uint64
							Data json.RawMessage
						}
						if err := json.Unmarshal(payload(f), &ev); err != nil {
							t.Fatal(err)
						}
						ch := cs[slices.IndexFunc(cs, func(c calls.Change) bool { return c.Seq == ev.Seq })]
						var want []byte
						switch ev.Type {
						case "extenUpdate":
							want = ch.JSON(v.Class(ch.Key))
						case "trunkUpdate", "queueUpdate":
							if c.deltas != 0 {
								t.Fatalf("%s: a %s", name, ev.Type)
							}
							want = ch.Whole(v.Class(""))
						case calls.TrunkConversations.String(), calls.QueueMembers.String():
							if c.deltas == 0 {
								t.Fatalf("%s: a %s", name, ev.Type)
							}
							want = ch.JSON(v.Class(""))
						case "queueMemberUpdate", "parkingUpdate":
							want = ch.JSON(v.Class(""))
						default:
							want = ch.Data
						}
						if !bytes.Equal(ev.Data, want) {
							t.Fatalf("%s, %s %s:\n got %s\nwant %s", name, ev.Type, ch.Key, ev.Data, want)
						}
						checked++
					}
					// The snapshot, collection by collection.
					var snap map[string]json.RawMessage
					if err := json.Unmarshal(payload(h.snapshotFrame(c, s, 0)), &snap); err != nil {
						t.Fatal(err)
					}
					wantColl := func(keys []string, get func(string) []byte) string {
						b := []byte{'{'}
						for i, k := range keys {
							if i > 0 {
								b = append(b, ',')
							}
							b = appendString(b, k)
							b = append(b, ':')
							b = append(b, get(k)...)
						}
						return string(append(b, '}'))
					}
					for coll, want := range map[string]string{
						"extensions": wantColl(s.Extensions.Keys(), func(k string) []byte { return s.ExtensionJSONAs(k, v.Class(k)) }),
						"queues":     wantColl(s.Queues.Keys(), func(k string) []byte { return s.QueueJSONAs(k, v.Class("")) }),
						"parkings":   wantColl(slices.Sorted(maps.Keys(s.Parkings)), func(k string) []byte { return s.ParkingJSONAs(k, v.Class("")) }),
						"trunks":     wantColl(s.Trunks.Keys(), func(k string) []byte { return s.TrunkJSONAs(k, v.Class("")) }),
					} {
						if string(snap[coll]) != want {
							t.Fatalf("%s snapshot %s:\n got %s\nwant %s", name, coll, snap[coll], want)
						}
					}
				}
			}
			if checked == 0 {
				t.Fatal("no events checked")
			}
		})
	}
}

// TestCoalescing: a queue that is not drained keeps one frame per entity,
// the latest, in seq order.
func TestCoalescing(t *testing.T) {
	eng := calls.New(calls.Config{})
	h := bareHub(t, eng, testUsers(t))
	root, _ := h.auth.(*auth.Service).Users().Lookup("root")
	c := h.addFake(root, topicExtensions)
	for i := range 1000 {
		eng.Apply(devState(fmt.Sprint(200+i%50), i%100 < 50))
		eng.Publish()
		cs, _ := eng.Feed().Since(h.last)
		h.fanout(cs)
		h.last = cs[len(cs)-1].Seq
	}
	q := c.take()
	if len(q) != 50 {
		t.Fatalf("%d frames queued for 50 extensions", len(q))
	}
	for i := 1; i < len(q); i++ {
		if q[i].seq <= q[i-1].seq {
			t.Fatalf("frames out of order: %d after %d", q[i].seq, q[i-1].seq)
		}
	}
	if q[len(q)-1].seq != eng.Feed().LastSeq() {
		t.Error("the latest change is not queued")
	}
	if got := testutil.ToFloat64(h.m.coalesced); got != 950 {
		t.Errorf("coalesced %v, want 950", got)
	}
}

// TestFanoutAllocs: fanning a change out allocates the same whether it
// goes to 10 clients or 1,000: nothing per client.
func TestFanoutAllocs(t *testing.T) {
	users := testUsers(t)
	allocs := func(n int, user string) float64 {
		eng := calls.New(calls.Config{})
		h := bareHub(t, eng, users)
		u, _ := users.Lookup(user)
		var conns []*conn
		for range n {
			conns = append(conns, h.addFake(u, topicExtensions))
		}
		i := 0
		step := func() {
			i++
			eng.Apply(devState("201", i%2 == 0))
			eng.Publish()
		}
		step()
		h.last = eng.Feed().LastSeq()
		ch := []calls.Change{{}}
		return testing.AllocsPerRun(200, func() {
			step()
			cs, _ := eng.Feed().Since(h.last)
			ch[0] = cs[0]
			h.last = ch[0].Seq
			h.fanout(ch)
			for _, c := range conns {
				c.mu.Lock()
				c.dropQueued()
				c.mu.Unlock()
			}
		}) - testing.AllocsPerRun(200, func() { // minus the engine's and Since's own
			step()
			cs, _ := eng.Feed().Since(h.last)
			h.last = cs[0].Seq
		})
	}
	for _, user := range []string{"root", "dave"} {
		few, many := allocs(10, user), allocs(1000, user)
		t.Logf("%s: %.1f allocations per change for 10 clients, %.1f for 1000", user, few, many)
		if many > few+0.5 {
			t.Errorf("%s: fan-out allocates per client: %.1f for 10 clients, %.1f for 1000", user, few, many)
		}
	}
}

// TestStalledClient: a client that reads nothing does not slow the others,
// its queue stays bounded by the number of entities, and it is closed.
func TestStalledClient(t *testing.T) {
	const exts = 100
	names := map[string]string{}
	long := string(bytes.Repeat([]byte("n"), 1500)) // big frames fill the socket buffers sooner
	for i := range exts {
		names[fmt.Sprint(300+i)] = long
	}
	// SlowTimeout closes the stalled client; a fast client delivered later
	// than that (under -race on a loaded machine: up to 700 ms seen) would
	// be closed as well.
	e := newEnv(t, calls.Config{Names: names}, auth.Config{}, Config{SlowTimeout: time.Second})
	stalled := e.dial("root")
	expectOp(t, stalled, "hello")
	stalled.Subscribe("extensions")

	const fast = 3
	var wg sync.WaitGroup
	lat := make([][]int64, fast)
	var final atomic.Uint64 // when set, fast clients stop once they have seen it
	for i := range fast {
		c := e.dial("paula")
		expectOp(t, c, "hello")
		c.Subscribe("extensions")
		expectOp(t, c, "snapshot")
		wg.Go(func() {
			for {
				m, err := c.Next(context.Background())
				if err != nil {
					t.Errorf("fast client: %v", err)
					return
				}
				if m.Op == "event" {
					lat[i] = append(lat[i], time.Now().UnixMilli()-m.At)
					if f := final.Load(); f != 0 && m.Seq >= f {
						return
					}
				}
			}
		})
	}

	maxQueued := 0
	watch := func() {
		e.hub.mu.Lock()
		for c := range e.hub.conns {
			c.mu.Lock()
			maxQueued = max(maxQueued, c.live)
			c.mu.Unlock()
		}
		e.hub.mu.Unlock()
	}
	slow := func() float64 { return testutil.ToFloat64(e.hub.m.closed.WithLabelValues("slow")) }
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; slow() == 0 && time.Now().Before(deadline); i++ {
		e.apply(devState(fmt.Sprint(300+i%exts), i/exts%2 == 0))
		if i%50 == 0 {
			watch()
			time.Sleep(2 * time.Millisecond) // about 20,000 changes/s
		}
	}
	if slow() == 0 {
		t.Fatal("the stalled client was never closed")
	}
	final.Store(e.eng.Feed().LastSeq() + 1)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; ; i++ {
		e.apply(devState("300", i%2 == 0))
		select {
		case <-done:
		case <-time.After(5 * time.Millisecond):
			continue
		}
		break
	}
	if maxQueued > exts+4 {
		t.Errorf("a queue held %d frames for %d entities", maxQueued, exts)
	}
	var all []int64
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	p99 := all[len(all)*99/100]
	// The latency is a figure, not a verdict: on a loaded 2-core machine
	// under -race its p99 passed 250 ms with the baseline as well.
	// wsbench measures it; this test checks that the fast clients got
	// everything, unharmed, and that the stalled one was bounded and shut.
	t.Logf("fast clients: %d events, p50 %d ms, p99 %d ms, max %d ms; stalled queue peaked at %d frames",
		len(all), all[len(all)/2], p99, all[len(all)-1], maxQueued)
	// The stalled client, reading at last, finds the data it was sent and
	// then the end: a 4008 close, or a dropped connection when a write
	// was stuck half-way.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := stalled.ReadRaw(); err != nil {
			if code := CloseCode(err); code != 0 && code != CloseTooSlow && code != 1006 { // 1006: dropped
				t.Errorf("stalled client closed with %d", code)
			}
			break
		}
	}
}

// TestDeltasNotCoalesced: a client that reads nothing while a recording
// with trunk (queue) calls plays gets every trunkConversations
// (queueMembers) change queued (each says what changed since the one
// before: replacing one by the next would lose it), and applying them to
// its snapshot gives the engine's trunks (queues); a client taking them
// whole has its trunkUpdates (queueUpdates) replaced by the latest.
func TestDeltasNotCoalesced(t *testing.T) {
	users := testUsers(t)
	for _, tc := range []struct {
		rec       string
		typ       calls.ChangeType
		coll, key string
		topic     uint8
		delta     uint8
	}{
		{"inbound_trunk_did", calls.TrunkConversations, "trunks", "trunk", topicTrunks, deltaTrunks},
		{"queue_answered", calls.QueueMembers, "queues", "support", topicQueues, deltaQueues},
	} {
		for _, name := range []string{"paula", "alice"} { // sees all calls, sees them hidden
			t.Run(tc.coll+"/"+name, func(t *testing.T) {
				eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
				eng.Publish()
				h := bareHub(t, eng, users)
				u, _ := users.Lookup(name)
				d := h.addFake(u, tc.topic)
				d.deltas = tc.delta
				w := h.addFake(u, tc.topic)
				var m mirror
				m.apply(t, snapshotMessage(t, h.snapshotFrame(d, eng.Snapshot(), 0)))
				sent := 0
				for _, msg := range loadRecording(t, tc.rec) {
					eng.Apply(msg)
					s := eng.Publish()
					cs, _ := eng.Feed().Since(h.last)
					for _, c := range cs {
						if c.Type == tc.typ && c.Key == tc.key {
							sent++
						}
					}
					h.fanout(cs)
					h.last = s.Seq
				}
				got, whole := 0, 0
				for _, f := range d.take() {
					var ev Message
					if err := json.Unmarshal(payload(f), &ev); err != nil {
						t.Fatal(err)
					}
					if ev.Type == tc.typ.String() && strings.Contains(string(ev.Data), `"`+tc.key+`"`) {
						got++
					}
					m.apply(t, ev)
				}
				if got != sent || sent < 3 {
					t.Fatalf("%d changes of %s queued for the deltas client, %d sent", got, tc.key, sent)
				}
				s := eng.Snapshot()
				cl := auth.ViewOf(u).Class("")
				want := s.TrunkJSONAs(tc.key, cl)
				if tc.coll == "queues" {
					want = s.QueueJSONAs(tc.key, cl)
				}
				if g, w := normTrunk(t, m.colls[tc.coll][tc.key]), normTrunk(t, string(want)); g != w {
					t.Errorf("what the deltas give\n%s\nthe snapshot's\n%s", g, w)
				}
				for _, f := range w.take() {
					var ev Message
					if err := json.Unmarshal(payload(f), &ev); err != nil {
						t.Fatal(err)
					}
					if ev.Type == tc.typ.String() {
						t.Fatalf("a %s for the client taking them whole", ev.Type)
					}
					if ev.Type == tc.typ.Whole().String() && strings.Contains(string(ev.Data), `"`+tc.key+`"`) {
						whole++
						if g, w := normTrunk(t, string(ev.Data)), normTrunk(t, string(want)); g != w {
							t.Errorf("the whole %s\n%s\nthe snapshot's\n%s", ev.Type, g, w)
						}
					}
				}
				if whole != 1 {
					t.Errorf("%d %ss of %s queued for the client taking them whole, want the latest only", whole, tc.typ.Whole().String(), tc.key)
				}
			})
		}
	}
}

// snapshotMessage decodes a snapshot frame.
func snapshotMessage(t *testing.T, f *frame) Message {
	t.Helper()
	var m Message
	if err := json.Unmarshal(payload(f), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
