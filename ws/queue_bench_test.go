package ws

import (
	"testing"

	"github.com/ctibridge/ctibridge/calls"
)

// BenchmarkQueueFanout: the hub's cost of the call centre's queue
// changes (25 queues of 40 agents, 5,000 extensions, 2,000 calls) for 100
// clients of each of three users (root and paula see the queues in full,
// alice with the callers' numbers hidden) subscribed to queues only,
// taking them whole (queueUpdate, the queue put together on the hub's
// goroutine: calls.Change.Whole) or as deltas (queueMembers), the
// engine's Apply and Publish outside the timer. An op is one fan-out
// holding a queue change; wire-B/client is what it queued for a client.
func BenchmarkQueueFanout(b *testing.B) {
	for _, mode := range []string{"whole", "deltas"} {
		b.Run(mode, func(b *testing.B) {
			cc := newCallCentre(b, 5000, 2000)
			users := testUsers(b)
			h := bareHub(b, cc.eng, users)
			for _, name := range []string{"root", "paula", "alice"} {
				u, _ := users.Lookup(name)
				for range 100 {
					c := h.addFake(u, topicQueues)
					if mode == "deltas" {
						c.deltas = deltaQueues
					}
				}
			}
			var wire int64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				since := h.last
				var cs []calls.Change
				for !hasType(cs, calls.QueueMembers) {
					cc.step()
					cs, _ = cc.eng.Feed().Since(since)
				}
				b.StartTimer()
				h.last = cs[len(cs)-1].Seq
				h.fanout(cs)
				b.StopTimer()
				wire += drain(h)
				b.StartTimer()
			}
			b.ReportMetric(float64(wire)/float64(b.N)/float64(len(h.clients)), "wire-B/client")
		})
	}
}
