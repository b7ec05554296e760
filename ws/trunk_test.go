package ws

import (
	"encoding/json"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestTrunkWholeShared: clients taking the trunk whole get, for each
// trunk change, one trunkUpdate frame per class shared by all of them,
// whose payload is the engine's bytes of the trunk in that class (its
// data not copied: Change.Whole's own slice), the same frame for both
// classes when their bytes are the same (a trunk without calls); the
// fan-out allocates less than one copy of the trunk beyond the frames of
// the changes' own bytes. In the call centre (a trunk of a hundred
// calls) and in a recording (inbound_trunk_did: the trunk empty, busy,
// empty again).
func TestTrunkWholeShared(t *testing.T) {
	t.Run("callcentre", func(t *testing.T) {
		cc := newCallCentre(t, 500, 200)
		tw := newTrunkWatch(t, cc.eng)
		for range 200 {
			cc.step()
			tw.fanout()
		}
		if tw.checked < 20 {
			t.Fatalf("%d fan-outs with a trunk change, want 20 or more", tw.checked)
		}
	})
	t.Run("recording", func(t *testing.T) {
		eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
		eng.Publish()
		tw := newTrunkWatch(t, eng)
		for _, msg := range loadRecording(t, "inbound_trunk_did") {
			eng.Apply(msg)
			eng.Publish()
			tw.fanout()
		}
		if tw.same < 2 || tw.checked-tw.same < 2 {
			t.Fatalf("%d trunk changes, %d the same in both classes: want 2 or more of either", tw.checked, tw.same)
		}
	})
}

// trunkWatch is a hub with 20 clients of each of root, paula (the trunk
// in full) and alice (its numbers hidden) taking the trunk whole, and
// what it checked of their frames.
type trunkWatch struct {
	t             *testing.T
	eng           *calls.Engine
	h             *Hub
	by            map[string][]*conn
	checked, same int
}

func newTrunkWatch(t *testing.T, eng *calls.Engine) *trunkWatch {
	users := testUsers(t)
	tw := &trunkWatch{t: t, eng: eng, h: bareHub(t, eng, users), by: map[string][]*conn{}}
	for _, name := range []string{"root", "paula", "alice"} {
		u, _ := users.Lookup(name)
		for range 20 {
			tw.by[name] = append(tw.by[name], tw.h.addFake(u, topicTrunks))
		}
	}
	return tw
}

// fanout fans out what the feed holds beyond the hub and, when it has a
// trunk change, checks the frames the clients got of it.
func (tw *trunkWatch) fanout() {
	t, h := tw.t, tw.h
	cs, _ := tw.eng.Feed().Since(h.last)
	if len(cs) == 0 {
		return
	}
	last := lastTrunk(cs)
	if last == nil {
		h.fanout(cs)
		h.last = cs[len(cs)-1].Seq
		for _, cs := range tw.by {
			for _, c := range cs {
				c.take()
			}
		}
		return
	}
	full, hid := last.Whole(calls.Full), last.Whole(calls.NumbersHidden)
	if full == nil || hid == nil {
		t.Fatal("the latest trunk change has no trunk whole")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.fanout(cs)
	runtime.ReadMemStats(&after)
	h.last = cs[len(cs)-1].Seq
	// The engine made its bytes before (Whole above): the fan-out frames
	// each change's own bytes (calls.Change.Data) once, and the trunk
	// whole in no copy: what it allocates beyond the first (the hub's
	// entity index growing now and then) stays below one copy of the
	// trunk.
	own := 0
	for i := range cs {
		own += len(cs[i].Data) + 128
	}
	if n := after.TotalAlloc - before.TotalAlloc; !raceEnabled && n > uint64(own+max(len(hid), 8<<10)) {
		t.Fatalf("the fan-out of %d changes (%d bytes framed) with the trunk whole (%d, hidden %d bytes) to %d clients allocated %d bytes", len(cs), own, len(full), len(hid), len(h.clients), n)
	}
	frames := map[string]*frame{}
	for name, cs := range tw.by {
		for _, c := range cs {
			q := c.take()
			if len(q) == 0 {
				t.Fatalf("%s got nothing of a trunk change", name)
			}
			f := q[len(q)-1]
			if g := frames[name]; g != nil && g != f {
				t.Fatalf("%s's clients got different frames of one trunk change", name)
			}
			frames[name] = f
		}
	}
	if frames["root"] != frames["paula"] {
		t.Fatal("root and paula, both seeing the trunk in full, got different frames")
	}
	for name, want := range map[string][]byte{"root": full, "alice": hid} {
		f := frames[name]
		if string(full) == string(hid) {
			want = full // both classes share the full class's frame
		}
		if len(f.more) == 0 || unsafe.SliceData(f.more[0]) != unsafe.SliceData(want) {
			t.Fatalf("%s's trunkUpdate does not hold the engine's bytes of its class: copied", name)
		}
		var ev Message
		if err := json.Unmarshal(payload(f), &ev); err != nil {
			t.Fatalf("%s's trunkUpdate: %v", name, err)
		}
		if ev.Type != "trunkUpdate" || ev.Seq != last.Seq || string(ev.Data) != string(want) {
			t.Fatalf("%s got %s seq %d %.80s, want trunkUpdate seq %d %.80s", name, ev.Type, ev.Seq, ev.Data, last.Seq, want)
		}
	}
	if string(full) == string(hid) {
		tw.same++
		if frames["root"] != frames["alice"] {
			t.Fatal("the trunk's bytes are the same in both classes, its frames are not")
		}
	}
	tw.checked++
}

// lastTrunk is the last trunkConversations change of cs, or nil.
func lastTrunk(cs []calls.Change) *calls.Change {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Type == calls.TrunkConversations {
			return &cs[i]
		}
	}
	return nil
}
