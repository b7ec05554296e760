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
			var deltas uint8
			if mode == "deltas" {
				deltas = deltaQueues
			}
			cc, h := callCentreHub(b, topicQueues, deltas)
			benchChanges(b, cc, h, calls.QueueMembers, func(cs []calls.Change, _ uint64) { h.fanout(cs) })
		})
	}
}
