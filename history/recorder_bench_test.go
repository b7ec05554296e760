package history

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// recordedCdr is the Cdr event of a real Asterisk call (cdr_manager),
// from ami/testdata.
func recordedCdr(t testing.TB) ami.Message {
	t.Helper()
	for _, m := range amitest.ReadRecording(t, "../ami/testdata/basic_call_caller_hangup.ami") {
		if m.Event() == "Cdr" {
			return m
		}
	}
	t.Fatal("no Cdr event in the recording")
	return ami.Message{}
}

// runRecorder runs a Recorder over s (with afterSync hooked in, when not
// nil) until the benchmark ends, and returns it with b.N Cdr events for
// it, each with its own UniqueID.
func runRecorder(b *testing.B, s Store, afterSync func([]CDR)) (*Recorder, []ami.Message) {
	b.Helper()
	rec, err := NewRecorder(s, RecorderConfig{SpoolDir: b.TempDir(), Location: time.UTC})
	if err != nil {
		b.Fatal(err)
	}
	rec.afterSync = afterSync
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	b.Cleanup(func() { cancel(); wg.Wait() })
	m := recordedCdr(b)
	events := make([]ami.Message, b.N)
	for i := range events {
		events[i] = m.Set("UniqueID", "1796028439."+strconv.Itoa(i))
	}
	return rec, events
}

// BenchmarkRecorder measures the whole CDR path: Observe of real Cdr
// events (each with its own UniqueID) until the Recorder has written
// them all to PostgreSQL, in the Recorder's batches. One op is one CDR.
//
//	go test -run '^$' -bench Recorder -benchtime 20000x ./history/
func BenchmarkRecorder(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			rec, events := runRecorder(b, bk.open(b, Config{}), nil)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for _, e := range events {
				rec.Observe(e)
			}
			for rec.Stats().Written < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "CDR/s")
			if n, total := rec.sp.Syncs(); n > 0 {
				b.ReportMetric(float64(b.N)/float64(n), "CDR/fsync")
				b.ReportMetric(float64(total.Microseconds())/float64(n), "µs/fsync")
			}
			if st := rec.Stats(); st.Dropped != 0 {
				b.Fatalf("dropped: %+v", st)
			}
		})
	}
}

// BenchmarkRecorderAck measures how long a CDR is at risk: from Observe
// to the end of the fsync that makes it durable, one CDR at a time (the
// PBX is quiet, so each CDR waits for a whole fsync of its own). This is
// the window in which a crash loses a CDR the bridge has read.
//
//	go test -run '^$' -bench RecorderAck -benchtime 2000x ./history/
func BenchmarkRecorderAck(b *testing.B) {
	acked := make(chan struct{}, 1)
	rec, events := runRecorder(b, NewSQLite(openSQLite(b), Config{}), func([]CDR) { acked <- struct{}{} })
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range events {
		rec.Observe(e)
		<-acked
	}
}
