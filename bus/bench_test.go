package bus

import (
	"context"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// BenchmarkRecord: the leader's cost of recording, per AMI message, on
// top of the engine's own Apply and Publish (the same batches through a
// bare engine are BenchmarkEngineAlone). Flush keeps nothing.
func BenchmarkRecord(b *testing.B) {
	msgs := readRecording(b, "../ami/testdata/load_10_calls_5cps.ami")
	var bytes int
	b.ReportAllocs()
	for b.Loop() {
		r := NewReplica(calls.Config{})
		r.Record(func(data []byte, final bool) error { bytes += len(data); return nil }, nil, nil)
		batches(r, msgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
	b.ReportMetric(float64(bytes)/float64(b.N*len(msgs)), "bytes/msg")
}

// BenchmarkReplay: a follower's cost per AMI message: decoding the ops
// and running the engine.
func BenchmarkReplay(b *testing.B) {
	msgs := readRecording(b, "../ami/testdata/load_10_calls_5cps.ami")
	var log [][]byte
	r := NewReplica(calls.Config{})
	r.Record(func(data []byte, final bool) error { log = append(log, append([]byte(nil), data...)); return nil }, nil, nil)
	batches(r, msgs)
	b.ReportAllocs()
	for b.Loop() {
		f := NewReplica(calls.Config{})
		for _, m := range log {
			if err := f.Replay(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

// BenchmarkEngineAlone is the baseline of both: the same batches through
// a bare engine.
func BenchmarkEngineAlone(b *testing.B) {
	msgs := readRecording(b, "../ami/testdata/load_10_calls_5cps.ami")
	b.ReportAllocs()
	for b.Loop() {
		batches(calls.New(calls.Config{}), msgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

// batches applies msgs in batches of 8, each ended by Publish, as a link
// does under load.
func batches(e interface {
	Apply(ami.Message)
	Publish() *calls.Snapshot
}, msgs []ami.Message) {
	for i, m := range msgs {
		e.Apply(m)
		if i%8 == 7 {
			e.Publish()
		}
	}
	e.Publish()
}

// readyPBX answers Next at once with the same batch.
type readyPBX struct{ evs []ami.Event }

func (p readyPBX) Next(context.Context) ([]ami.Event, error) { return p.evs, nil }
func (p readyPBX) Do(context.Context, ami.Message) (ami.Response, error) {
	return ami.Response{}, nil
}

// BenchmarkLinkPBXNext: what the rollover's wrapper adds to each batch
// the link reads (the client's Next answering at once).
func BenchmarkLinkPBXNext(b *testing.B) {
	p := NewLinkPBX(readyPBX{evs: []ami.Event{{Msg: ami.NewMessage(ami.Header{Key: "Event", Value: "Newstate"})}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordBounded is BenchmarkRecord with the messages bounded
// as under a 1 MiB max_payload (Node.boundMessages).
func BenchmarkRecordBounded(b *testing.B) {
	msgs := readRecording(b, "../ami/testdata/load_10_calls_5cps.ami")
	b.ReportAllocs()
	for b.Loop() {
		r := NewReplica(calls.Config{})
		r.maxMsg, r.chunk = 1<<20-4096, DefaultChunk
		r.Record(func(data []byte, final bool) error { return nil }, nil, nil)
		batches(r, msgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
