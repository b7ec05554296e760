package webhook

import (
	"testing"

	"github.com/ctibridge/ctibridge/calls"
)

// feedOf replays a recording through the engine and returns its feed.
func feedOf(b *testing.B, name string) []calls.Change {
	p := &pbx{}
	p.eng = calls.New(calls.Config{Now: p.sc.Now, Trunks: []string{"trunk"}})
	p.eng.SetLink(calls.LinkLive)
	p.eng.Publish()
	p.play(loadAMI(b, name))
	cs, ok := p.eng.Feed().Since(0)
	if !ok {
		b.Fatal("feed overflow")
	}
	return cs
}

// BenchmarkChange is the feed reader's cost per change of the engine's
// feed, with one webhook for every extension: the filter, the decode of
// extension changes with calls, the tracker, and the encoding and
// queueing of the events raised (about one change in six raises one).
// "other" are changes it skips (queues, presence) and "idle" extension
// changes without calls; "calls/site2" the calls of a named PBX, whose
// events are qualified.
func BenchmarkChange(b *testing.B) {
	all := feedOf(b, "queue_answered")
	var busy, other, idle []calls.Change
	for _, c := range all {
		switch {
		case c.Type != calls.ExtenUpdate:
			other = append(other, c)
		case len(c.Data) > 0 && c.Data[len(c.Data)-3] == '{':
			idle = append(idle, c)
		default:
			busy = append(busy, c)
		}
	}
	for _, bc := range []struct {
		name string
		cs   []calls.Change
		pbx  string
	}{{"all", all, ""}, {"calls", busy, ""}, {"other", other, ""}, {"idle", idle, ""}, {"calls/site2", busy, "site2"}} {
		b.Run(bc.name, func(b *testing.B) {
			h := memHook(b)
			s := &Service{hooks: []*hook{h}, log: discard()}
			tr := newTracker(bc.pbx, lookup, s.inScope) // a named PBX's: its events qualified
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := &bc.cs[i%len(bc.cs)]
				if err := tr.change(c, s.emit); err != nil {
					b.Fatal(err)
				}
				if len(h.mem) > 4096 {
					h.mem = h.mem[:0]
				}
			}
		})
	}
}

// BenchmarkSendHeldNone is what the feed reader pays on every wake while
// sending, with no CDRs held (nearly always).
func BenchmarkSendHeldNone(b *testing.B) {
	s, r := &Service{log: discard()}, &reader{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.sendHeld(r)
		}
	})
}
