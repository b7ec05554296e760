package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// BenchmarkPublishMix is the Publish of ApplyPublishAtScale/mix/batch64
// alone: 64 events of the call centre's mix applied (not counted), then
// one Publish, whose CPU time is reported (cpu-ns/publish; the two rusage
// reads around it add a small constant). What a Publish costs there is mostly
// the queues' and the trunk's encoding and the extensions'.
func BenchmarkPublishMix(b *testing.B) {
	e, m := mixEngine(b, 5000, 2000)
	msgs := m.stream(1 << 16)
	next := func() []ami.Message {
		if len(msgs) < 64 {
			msgs = m.stream(1 << 16)
		}
		batch := msgs[:64]
		msgs = msgs[64:]
		return batch
	}
	var pub time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, msg := range next() {
			e.Apply(msg)
		}
		b.StartTimer()
		t := cpuTime()
		e.Publish()
		pub += cpuTime() - t
	}
	b.ReportMetric(float64(pub.Nanoseconds())/float64(b.N), "cpu-ns/publish")
}
