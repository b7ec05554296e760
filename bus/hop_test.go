package bus

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
)

// BenchmarkEdgeHop: what an edge adds to a change's way to the screen over
// the bridge's own process: from the leader's publish of a batch (an
// Apply and a Publish of a real recording, fenced as the leader does) to
// the edge's engine having replayed it, through one local nats-server
// with JetStream on file. Reports p50 and p99 in µs.
func BenchmarkEdgeHop(b *testing.B) {
	srv := natstest.Start(b)
	edge := NewReplica(calls.Config{})
	n, err := Open(context.Background(), Config{URL: srv.URL(), PBX: "hop", Node: "edge", Served: edge})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// The batches: a recording through a recording replica, batch by batch.
	var log [][]byte
	rec := NewReplica(calls.Config{})
	rec.Record(func(data []byte, final bool) error { log = append(log, slices.Clone(data)); return nil }, nil, nil)
	msgs := readRecording(b, "../ami/testdata/load_10_calls_5cps.ami")
	for _, m := range msgs {
		rec.Apply(m)
		rec.Publish()
	}
	info, err := n.stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	last := info.State.LastSeq
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		ack, err := n.js.Publish(ctx, n.subject, log[i%len(log)], jetstream.WithExpectLastSequence(last))
		if err != nil {
			b.Fatal(err)
		}
		last = ack.Sequence
		for n.applied.Load() < last {
			runtime.Gosched()
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
