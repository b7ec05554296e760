package ws

import (
	"fmt"
	"testing"
)

// BenchmarkResume: N clients resume the same gap, as the screens of a
// restarted edge do on the node they reconnect to: one second of the
// call centre of docs/loadtest.md (5,000 extensions, 2,000 calls, 50 new
// calls a second), every topic, the users of testUsers in turn (three
// classes of view, the limited ones filtered per extension), every other
// one taking trunk deltas. An op is all N subscribes with since, served
// as Run serves them (one hub pass); the queues are emptied outside the
// timer. wire-B/client is what each client was queued.
func BenchmarkResume(b *testing.B) {
	cc := newCallCentre(b, 5000, 2000)
	users := testUsers(b).All()
	for _, n := range []int{300, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			h := bareHub(b, cc.eng, testUsers(b))
			h.cfg.ReplayMaxAge = 1 << 62 // the call centre's clock is virtual
			for i := range n {
				c := h.addFake(users[i%len(users)], allTopics)
				if i/len(users)%2 == 1 {
					c.deltas = deltaAll
				}
			}
			since := h.last
			for range 50 {
				cc.step()
			}
			h.last = cc.eng.Feed().LastSeq()
			var wire int64
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range h.clients {
					c.mu.Lock()
					c.sub = &subReq{topics: allTopics, deltas: c.deltas, resume: true, since: since}
					c.mu.Unlock()
					h.handle(ctlMsg{kind: ctlSubscribe, c: c})
				}
				h.endPass()
				b.StopTimer()
				for _, c := range h.clients {
					if c.queued()[frameResumed] != 1 {
						b.Fatal("not resumed")
					}
				}
				wire += drain(h)
				b.StartTimer()
			}
			b.ReportMetric(float64(wire)/float64(b.N)/float64(n), "wire-B/client")
			b.ReportMetric(float64(since), "since")
			b.ReportMetric(float64(h.last-since), "gap")
		})
	}
}
