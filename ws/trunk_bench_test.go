package ws

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// callCentre is the synthetic call centre of docs/loadtest.md on an
// engine (5,000 extensions, 2,000 calls up, about 1,200 of them on the
// one trunk), in virtual time, and the stream that keeps it so.
type callCentre struct {
	eng *calls.Engine
	gen *synthpbx.Gen
	out []ami.Message
	now time.Time
}

func newCallCentre(tb testing.TB, exts, up int) *callCentre {
	tb.Helper()
	cc := &callCentre{now: time.Unix(1796028439, 0)}
	clock := func() time.Time { return cc.now }
	p, err := synthpbx.New(exts, 25, exts/125, func(m ami.Message) { cc.out = append(cc.out, m) }, clock)
	if err != nil {
		tb.Fatal(err)
	}
	const rate = 50 // new calls a second
	hold := time.Duration(up) * time.Second / rate
	if cc.gen, err = synthpbx.NewGen(p, synthpbx.Mix{Queue: 0.3, Trunk: 0.3, Transfer: 0.1, Hold: hold, Ring: time.Second}, 1); err != nil {
		tb.Fatal(err)
	}
	cc.eng = calls.New(calls.Config{Now: clock, Opaque: auth.Opaquer{}})
	p.Announce()
	for i := range up {
		cc.gen.Fill(cc.now, cc.now.Add(hold*time.Duration(i+1)/time.Duration(up)))
	}
	cc.step()
	if n := cc.gen.Up(); n < up*9/10 {
		tb.Fatalf("%d calls up, want about %d", n, up)
	}
	return cc
}

// step moves the call centre on by one new call's time, applies what it
// emitted and Publishes.
func (cc *callCentre) step() {
	cc.now = cc.now.Add(time.Second / 50)
	cc.gen.Due(cc.now)
	cc.gen.Start(cc.now)
	for _, m := range cc.out {
		cc.eng.Apply(m)
	}
	cc.out = cc.out[:0]
	cc.eng.Publish()
}

// BenchmarkTrunkWhole: the hub's cost of the call centre's trunk
// changes for 100 clients of each of three users (root and paula see
// the trunk in full, alice with its numbers hidden) that take the trunk
// whole (no deltas, trunkUpdate), the engine's Apply and Publish outside
// the timer. fanout: an op is one fan-out holding a trunk change; resume:
// an op is every client resuming from just before one.
func BenchmarkTrunkWhole(b *testing.B) {
	for _, mode := range []string{"fanout", "resume"} {
		b.Run(mode, func(b *testing.B) {
			cc, h := callCentreHub(b, topicTrunks, 0)
			h.cfg.ReplayMaxAge = 1 << 62 // the call centre's clock is virtual
			benchChanges(b, cc, h, calls.TrunkConversations, func(cs []calls.Change, since uint64) {
				if mode == "fanout" {
					h.fanout(cs)
					return
				}
				for _, c := range h.clients {
					if !h.resume(c, since) {
						b.Fatal("not resumed")
					}
				}
			})
		})
	}
}

// callCentreHub is the call centre (5,000 extensions, 2,000 calls) and
// a hub with 100 clients of each of root, paula (who see everything in
// full) and alice (numbers hidden), subscribed to topics and taking
// deltas.
func callCentreHub(b *testing.B, topics, deltas uint8) (*callCentre, *Hub) {
	cc := newCallCentre(b, 5000, 2000)
	users := testUsers(b)
	h := bareHub(b, cc.eng, users)
	for _, name := range []string{"root", "paula", "alice"} {
		u, _ := users.Lookup(name)
		for range 100 {
			h.addFake(u, topics).deltas = deltas
		}
	}
	return cc, h
}

// drain empties every client's queue and returns the bytes it held.
func drain(h *Hub) (n int64) {
	for _, c := range h.clients {
		for _, f := range c.take() {
			n += int64(len(f.b))
			for _, p := range f.more {
				n += int64(len(p))
			}
		}
	}
	return n
}

// benchChanges times op b.N times, each on the call centre's changes
// since the hub's last up to one of type typ (stepped and published
// outside the timer), and reports what op queued a client.
func benchChanges(b *testing.B, cc *callCentre, h *Hub, typ calls.ChangeType, op func(cs []calls.Change, since uint64)) {
	var wire int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		since := h.last
		var cs []calls.Change
		for !hasType(cs, typ) {
			cc.step()
			cs, _ = cc.eng.Feed().Since(since)
		}
		b.StartTimer()
		h.last = cs[len(cs)-1].Seq
		op(cs, since)
		b.StopTimer()
		wire += drain(h)
		b.StartTimer()
	}
	b.ReportMetric(float64(wire)/float64(b.N)/float64(len(h.clients)), "wire-B/client")
}

// hasType reports whether cs holds a change of type typ.
func hasType(cs []calls.Change, typ calls.ChangeType) bool {
	for i := range cs {
		if cs[i].Type == typ {
			return true
		}
	}
	return false
}
