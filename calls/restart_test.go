package calls

import (
	"testing"
	"time"
)

// feedAll applies msgs, publishing after each, on a clock of its own.
func feedAll(e *Engine, clock *time.Time, rec *recording) {
	e.SetLink(LinkLive)
	for _, m := range rec.msgs {
		*clock = clock.Add(100 * time.Millisecond)
		e.Apply(m)
		e.Publish()
	}
}

// TestRestartAndAdopt: a restarted engine is a new one but for its feed,
// which goes on after the seq given, emptied; an engine that adopts
// another serves its snapshot and goes on from its state byte for byte,
// keeping its own feed (readers behind must start from the snapshot).
func TestRestartAndAdopt(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	start := time.UnixMilli(1796027700000)
	// Each engine its clock, as the replicas of package bus.
	with := func(clock *time.Time) Config {
		*clock = start
		return Config{Now: func() time.Time { return *clock }, Names: map[string]string{"201": "Alice"}, FeedSize: 1000}
	}
	var clock, bclock, cclock time.Time
	cfg := with(&clock)
	a := New(cfg)
	feed := a.Feed()
	feedAll(a, &clock, rec)
	before := feed.LastSeq()
	wake := feed.Wait()
	a.Restart(before + 1000)
	select {
	case <-wake:
	default:
		t.Fatal("Restart did not wake the feed's readers")
	}
	fresh := New(cfg)
	if a.Feed() != feed || a.Snapshot().Seq != before+1000 || string(a.Snapshot().StateJSON()) != string(fresh.Snapshot().StateJSON()) {
		t.Fatalf("restarted: same feed %v, seq %d, state %s; want a new engine's at %d", a.Feed() == feed, a.Snapshot().Seq, a.Snapshot().StateJSON(), before+1000)
	}
	if _, ok := feed.Since(before); ok {
		t.Fatal("a reader from before the restart resumed")
	}
	if base, cs, ok := feed.Generation(); !ok || base != before+1000 || len(cs) != 0 {
		t.Fatalf("restarted generation: base %d, %d changes (ok %v)", base, len(cs), ok)
	}
	// Adopt: b is fed the recording on its own; a takes its state over
	// and both go on identically.
	b := New(with(&bclock))
	b.Restart(before + 2000)
	feedAll(b, &bclock, rec)
	a.Adopt(b)
	if a.Snapshot() != b.Snapshot() || feed.LastSeq() != b.Feed().LastSeq() {
		t.Fatalf("adopted: snapshot seq %d, feed at %d; want %d", a.Snapshot().Seq, feed.LastSeq(), b.Feed().LastSeq())
	}
	c := New(with(&cclock))
	c.Restart(before + 2000)
	feedAll(c, &cclock, rec)
	// The adopted changes are a's now: a reader from before the
	// adoption replays them as c's feed has them, from b's restart.
	if _, ok := feed.Since(before + 1000); ok {
		t.Fatal("a reader from before the adoption resumed")
	}
	base, ga, ok := feed.Generation()
	_, gc, _ := c.Feed().Generation()
	if !ok || base != before+2000 || len(ga) == 0 || len(ga) != len(gc) || ga[0].Seq != base+1 {
		t.Fatalf("adopted generation: base %d, %d changes (ok %v), want base %d and c's %d", base, len(ga), ok, before+2000, len(gc))
	}
	for i := range ga {
		if ga[i].Seq != gc[i].Seq || string(ga[i].Data) != string(gc[i].Data) {
			t.Fatalf("adopted change %d: %d %s, want %d %s", i, ga[i].Seq, ga[i].Data, gc[i].Seq, gc[i].Data)
		}
	}
	last := feed.LastSeq()
	clock = bclock // a goes on at the adopted state's time
	feedAll(a, &clock, rec)
	feedAll(c, &cclock, rec)
	ca, _ := feed.Since(last)
	cc, _ := c.Feed().Since(last)
	if string(a.Snapshot().StateJSON()) != string(c.Snapshot().StateJSON()) || len(ca) != len(cc) || len(ca) == 0 {
		t.Fatalf("after the adoption: %d changes against %d", len(ca), len(cc))
	}
	for i := range ca {
		if ca[i].Seq != cc[i].Seq || string(ca[i].Data) != string(cc[i].Data) {
			t.Fatalf("change %d: %d %s, want %d %s", i, ca[i].Seq, ca[i].Data, cc[i].Seq, cc[i].Data)
		}
	}
}

// TestAdoptKeepsPrevious: after an adoption the changes of the run it
// replaced are still there for a reader that had not read them all
// (Previous), from any seq of that run, in order; not from a seq of
// another run, nor after a second adoption or a Restart.
func TestAdoptKeepsPrevious(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	var clock, bclock time.Time
	a := New(Config{Now: func() time.Time { return clock }, FeedSize: 1000})
	feed := a.Feed()
	feedAll(a, &clock, rec)
	mid, last := feed.LastSeq()/2, feed.LastSeq()
	want, _ := feed.Since(mid)
	b := New(Config{Now: func() time.Time { return bclock }, FeedSize: 1000})
	b.Restart(last + 1000)
	feedAll(b, &bclock, rec)
	a.Adopt(b)
	got, ok := feed.Previous(mid)
	if !ok || len(got) != len(want) || len(got) == 0 {
		t.Fatalf("previous run after seq %d: %d changes (ok %v), want %d", mid, len(got), ok, len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("previous change %d: %d %s, want %d %s", i, got[i].Seq, got[i].Data, want[i].Seq, want[i].Data)
		}
	}
	if cs, ok := feed.Previous(last); !ok || len(cs) != 0 {
		t.Fatalf("a reader at the previous run's end: %d changes (ok %v), want none, ok", len(cs), ok)
	}
	if _, ok := feed.Previous(last + 1000); ok {
		t.Fatal("Previous answered a seq of the current run")
	}
	c := New(Config{Now: func() time.Time { return bclock }, FeedSize: 1000})
	c.Restart(feed.LastSeq() + 1000)
	feedAll(c, &bclock, rec)
	a.Adopt(c)
	if _, ok := feed.Previous(mid); ok {
		t.Fatal("a seq of the run two adoptions ago answered")
	}
	a.Restart(feed.LastSeq() + 1000)
	if _, ok := feed.Previous(feed.LastSeq() - 1000); ok {
		t.Fatal("Previous answered after a Restart")
	}
}
