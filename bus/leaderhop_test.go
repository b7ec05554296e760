package bus

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
)

// hopPace is the pause between two batches in the paced hops: about the
// bench's 24 batches a second (bench/edges.sh at 10 calls/s), so that
// every batch finds the goroutines on its way asleep, as in production.
const hopPace = 20 * time.Millisecond

// hop is one paced batch's times from the leader's Publish: until the
// fenced publish was acknowledged (Publish returned), and until the
// served replica's feed woke (where the WebSocket hub takes over).
type hop struct{ ack, screen time.Duration }

// leaderHop runs a bridge node that leads on srv and returns a function
// that, paced, has its link record batches batches back to back (an
// extension's status flipped in each: a change on screen every time, as
// when a call's events come in while the previous batch is published)
// and times them on the bridge's own served replica: the bus path of
// `serve --bus`, in process. ack is the first batch's, screen the last's.
func leaderHop(tb testing.TB, url string, batches int) func() hop {
	ecfg := calls.Config{FeedSize: 1000}
	served, primary := NewReplica(ecfg), NewReplica(ecfg)
	ask, got := make(chan int), make(chan hop)
	cfg := Config{URL: url, PBX: "leaderhop" + strconv.Itoa(batches), Node: "bridge", Served: served, Primary: primary,
		Fingerprint: EngineFingerprint(ecfg)}
	cfg.Lead = func(ctx context.Context) error { // the link's goroutine
		feed := served.Engine().Feed()
		for {
			var i int
			select {
			case i = <-ask:
			case <-ctx.Done():
				return nil
			}
			var h hop
			t0 := time.Now()
			for k := range batches {
				primary.Apply(extStatus("201", 8*((i+k)%2)))
				primary.Publish()
				if k == 0 {
					h.ack = time.Since(t0)
				}
			}
			// Seqs are the same on every replica: the last batch's
			// change is on screen when the served feed reaches it.
			target := primary.Engine().Feed().LastSeq()
			h.screen = -1
			for deadline := time.After(5 * time.Second); h.screen < 0; {
				wake := feed.Wait()
				if feed.LastSeq() >= target {
					h.screen = time.Since(t0)
					break
				}
				select {
				case <-wake:
				case <-deadline:
					h.screen = 0
				}
			}
			got <- h
		}
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done; n.Close() })
	i := 0
	return func() hop {
		time.Sleep(hopPace)
		i++
		select {
		case ask <- i:
		case err := <-done:
			tb.Fatalf("the node stopped: %v", err)
		case <-time.After(30 * time.Second):
			tb.Fatal("the node did not lead in 30 s")
		}
		h := <-got
		if h.screen <= 0 {
			tb.Fatal("the served replica did not show a batch in 5 s")
		}
		return h
	}
}

func extStatus(ext string, status int) ami.Message {
	return ami.NewMessage(ami.Header{Key: "Event", Value: "ExtensionStatus"}, ami.Header{Key: "Exten", Value: ext},
		ami.Header{Key: "Context", Value: "from-internal"}, ami.Header{Key: "Hint", Value: "PJSIP/" + ext},
		ami.Header{Key: "Status", Value: strconv.Itoa(status)}, ami.Header{Key: "StatusText", Value: "x"})
}

// bareHop is the same pace through JetStream alone, as bus/ uses it (a
// file-storage stream, a publish fenced by WithExpectLastSequence, an
// ordered consumer's Messages()), with no node: what of leaderHop is
// JetStream's own.
func bareHop(tb testing.TB, url string) func() hop {
	n, err := Open(context.Background(), Config{URL: url, PBX: "barehop", Node: "bare", Served: NewReplica(calls.Config{})})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(n.Close)
	ctx := context.Background()
	info, err := n.stream.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	last := info.State.LastSeq
	cons, err := n.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: last + 1})
	if err != nil {
		tb.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(it.Stop)
	arrived := make(chan time.Time, 1)
	go func() {
		for {
			if _, err := it.Next(); err != nil {
				return
			}
			arrived <- time.Now()
		}
	}()
	r := NewReplica(calls.Config{})
	var data []byte
	r.Record(func(b []byte, final bool) error { data = slices.Clone(b); return nil }, nil, nil)
	r.Apply(extStatus("201", 8))
	r.Publish()
	return func() hop {
		time.Sleep(hopPace)
		t0 := time.Now()
		ack, err := n.js.Publish(ctx, n.subject, data, jetstream.WithExpectLastSequence(last))
		if err != nil {
			tb.Fatal(err)
		}
		h := hop{ack: time.Since(t0)}
		last = ack.Sequence
		select {
		case t := <-arrived:
			h.screen = t.Sub(t0)
		case <-time.After(5 * time.Second):
			tb.Fatal("no delivery in 5 s")
		}
		return h
	}
}

// BenchmarkLeaderHop: what the bus adds to a change's way to the screen
// on the bridge itself (serve --bus), paced like the calls: from the
// link's Publish of a batch to the bridge's served replica having shown
// it (ack-µs: the fenced publish acknowledged; screen-µs: the served
// feed woke); bus-2batches: two batches back to back, as when a call's
// events come in while the batch before them is published (screen-µs:
// the second's); and, for comparison in the same sitting, JetStream
// alone at the same pace (jetstream: screen-µs is the consumer's
// delivery).
//
//	go test -run '^$' -bench LeaderHop -benchtime 200x ./bus/
func BenchmarkLeaderHop(b *testing.B) {
	srv := natstest.Start(b)
	for _, c := range []struct {
		name string
		hop  func(testing.TB, string) func() hop
	}{{"jetstream", bareHop}, {"bus", hops(1)}, {"bus-2batches", hops(2)}} {
		b.Run(c.name, func(b *testing.B) {
			next := c.hop(b, srv.URL())
			next() // the lead taken, the consumer up
			var ack, screen []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h := next()
				ack, screen = append(ack, h.ack), append(screen, h.screen)
			}
			b.StopTimer()
			reportQuantiles(b, "ack", ack)
			reportQuantiles(b, "screen", screen)
		})
	}
}

func hops(batches int) func(testing.TB, string) func() hop {
	return func(tb testing.TB, url string) func() hop { return leaderHop(tb, url, batches) }
}

func reportQuantiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-µs")
}

// TestLeaderHopPaced: the bus path on the bridge, paced like the calls,
// shows a batch within 2 ms of JetStream's own round trip at the median
// (the same pace through JetStream alone, interleaved, so that the
// machine's load counts on both).
// It fails when a timer comes back on the way: a consumer polled on a
// ticker, a fetch that waits for a batch to fill, a timer-driven flush or
// apply, a publish that waits for something besides its ack.
func TestLeaderHopPaced(t *testing.T) {
	srv := natstest.Start(t)
	bus, bare := leaderHop(t, srv.URL(), 1), bareHop(t, srv.URL())
	bus()
	bare()
	var b, j []time.Duration
	for range 50 {
		b, j = append(b, bus().screen), append(j, bare().screen)
	}
	slices.Sort(b)
	slices.Sort(j)
	p50, js := b[len(b)/2], j[len(j)/2]
	t.Logf("paced %v: leader's Publish to its served replica's feed p50 %v (p90 %v); JetStream alone p50 %v (p90 %v)",
		hopPace, p50, b[len(b)*9/10], js, j[len(j)*9/10])
	if p50 > js+2*time.Millisecond {
		t.Fatalf("p50 %v against JetStream's %v: a batch waits on the bus path (want within 2 ms of it)", p50, js)
	}
}
