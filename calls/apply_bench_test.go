package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// BenchmarkApplyAtScale is BenchmarkApplyPublishAtScale/batch64 and
// mix/batch64 with Apply's CPU time alone reported (apply-cpu-ns/event):
// the Publish every 64 events runs outside it. The two rusage reads
// around each 64 Applies add a small constant an event.
func BenchmarkApplyAtScale(b *testing.B) {
	b.Run("batch64", func(b *testing.B) {
		e, s := scaleEngine(b, 5000, 2000)
		applyAtScale(b, e, func() []ami.Message { return s.stream(1 << 16) })
	})
	b.Run("mix/batch64", func(b *testing.B) {
		e, m := mixEngine(b, 5000, 2000)
		applyAtScale(b, e, func() []ami.Message { return m.stream(1 << 16) })
	})
}

func applyAtScale(b *testing.B, e *Engine, next func() []ami.Message) {
	msgs := next()
	var apply time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	j := 0
	for i := 0; i < b.N; {
		n := min(64, b.N-i, len(msgs)-j)
		t := cpuTime()
		for _, m := range msgs[j : j+n] {
			e.Apply(m)
		}
		apply += cpuTime() - t
		e.Publish()
		i, j = i+n, j+n
		if j == len(msgs) {
			b.StopTimer()
			msgs, j = next(), 0
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(apply.Nanoseconds())/float64(b.N), "apply-cpu-ns/event")
}
