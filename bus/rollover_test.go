package bus

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// replayLog applies a log of ops and genesis messages as Run does.
func replayLog(t *testing.T, r *Replica, log [][]byte) {
	t.Helper()
	for i, m := range log {
		kind, g, _, err := decodeControl(m)
		switch {
		case err != nil:
			t.Fatalf("message %d: %v", i, err)
		case kind == kindGenesis:
			r.generation(g)
		default:
			if err := r.Replay(m); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}
}

// rolledLog is the log of a recording replica that rolled over between
// two recordings.
type rolledLog struct {
	leader *Replica
	log    [][]byte
	at     int     // index of the genesis in log
	g      genesis // the genesis
	before uint64  // the leader's feed seq before it
	clock  time.Time
}

// recordRolled drives a recording replica over first, then rolls it over
// in the middle of a batch (its ops go out as a chunk first) and drives
// it over second; the resync after the genesis goes out in several
// messages.
func recordRolled(t *testing.T, first, second []ami.Message) *rolledLog {
	rl := &rolledLog{at: -1, clock: time.UnixMilli(1796027700000)}
	leader := NewReplica(engineConfig())
	rl.leader = leader
	leader.chunk = 256
	leader.Record(func(data []byte, final bool) error {
		rl.log = append(rl.log, bytes.Clone(data))
		return nil
	}, func(err error) { t.Fatal(err) }, func() time.Time { return rl.clock })
	tick := func() { rl.clock = rl.clock.Add(137 * time.Millisecond) }
	leader.onRoll = func() (genesis, error) {
		rl.g = genesis{ID: "epoch", Created: rl.clock.UnixMilli(), Gen: 2, Base: leader.Engine().Feed().LastSeq() + baseGap}
		rl.at = len(rl.log)
		rl.log = append(rl.log, rl.g.encode())
		return rl.g, nil
	}
	drive(leader, first, tick)
	rl.before = leader.Engine().Feed().LastSeq()
	leader.Followups(calls.FollowPending)
	leader.roll.Store(true)
	drive(leader, second, tick)
	if rl.at < 0 {
		t.Fatal("no genesis recorded")
	}
	return rl
}

// TestRestartDeterministic: a recording replica rolls over in the middle
// of its traffic (the batch so far goes out, the genesis, the engine
// restarts); a replica that replayed the whole log and one that replayed
// only from the genesis on serve byte-identical state and feed, the
// recorder's, and a reader from before the genesis must start again from
// a snapshot.
func TestRestartDeterministic(t *testing.T) {
	second := readRecording(t, "../ami/testdata/basic_call_caller_hangup.ami")
	rl := recordRolled(t, readRecording(t, "../ami/testdata/load_10_calls_5cps.ami"), second)
	leader, log, at, before := rl.leader, rl.log, rl.at, rl.before
	want := state(leader.Engine())
	if s := leader.Engine().Snapshot().Seq; s <= before+baseGap {
		t.Fatalf("seq after the rollover %d, want past %d", s, before+baseGap)
	}
	if _, ok := leader.Engine().Feed().Since(before); ok {
		t.Fatal("a reader from before the rollover resumed: it must start from a snapshot")
	}
	// Up to the genesis and a message more, a replica clients read shows
	// the old state, stale (resyncing), not the restarted engine.
	all, fromGenesis := NewReplica(engineConfig()), NewReplica(engineConfig())
	replayLog(t, all, log[:at])
	old := all.Engine().Snapshot()
	shadowed := 0
	for i := at; i < len(log); i++ {
		replayLog(t, all, log[i:i+1])
		if all.shadow == nil {
			break
		}
		shadowed++
		if s := all.Engine().Snapshot(); s.Link != calls.LinkResyncing || !s.Stale || string(s.ExtensionsJSON()) != string(old.ExtensionsJSON()) {
			t.Fatalf("during the rollover's resync: link %v, stale %v; the extensions kept: %v", s.Link, s.Stale, string(s.ExtensionsJSON()) == string(old.ExtensionsJSON()))
		}
		if i == len(log)-1 {
			t.Fatal("the new generation was never adopted")
		}
	}
	if shadowed < 2 {
		t.Fatalf("the new generation was adopted %d messages after the genesis, want a resync in several", shadowed)
	}
	replayLog(t, all, log[at+shadowed+1:])
	replayLog(t, fromGenesis, log[at:])
	if got := state(fromGenesis.Engine()); got != state(all.Engine()) {
		t.Fatalf("from the genesis on, the state differs from the whole log's:\n--- whole\n%.1500s\n--- from the genesis\n%.1500s", state(all.Engine()), got)
	}
	for name, r := range map[string]*Replica{"whole log": all, "from the genesis": fromGenesis} {
		if got, w := string(r.Engine().Snapshot().StateJSON()), string(leader.Engine().Snapshot().StateJSON()); got != w {
			t.Fatalf("%s: snapshot differs from the recorder's:\n--- recorder\n%.1500s\n--- replay\n%.1500s", name, w, got)
		}
		if r.shadow != nil || r.Engine().Snapshot().Seq <= before+baseGap {
			t.Fatalf("%s: the new generation was not adopted (seq %d)", name, r.Engine().Snapshot().Seq)
		}
	}
	// The restarted engine is New's: the second recording alone on a
	// fresh recorder, restarted at the same base, gives the same state.
	fresh := NewReplica(engineConfig())
	g, _ := func() (genesis, error) { _, g, _, err := decodeControl(log[at]); return g, err }()
	fresh.restart(g)
	clock := time.UnixMilli(g.Created)
	fresh.Record(func([]byte, bool) error { return nil }, func(err error) { t.Fatal(err) }, func() time.Time { return clock })
	drive(fresh, second, func() { clock = clock.Add(137 * time.Millisecond) })
	if got := state(fresh.Engine()); got != want {
		t.Fatal("the restarted engine differs from a new one restarted at the same base")
	}
}

// TestGenesisCodec: a genesis round-trips; one written before rollovers
// (id and time only) reads as the first generation.
func TestGenesisCodec(t *testing.T) {
	g := genesis{ID: "0123abcd", Created: 1_700_000_000_123, Gen: 7, Base: 5 << 20}
	if k, got, _, err := decodeControl(g.encode()); err != nil || k != kindGenesis || got != g {
		t.Fatalf("decode = %d %+v %v, want %+v", k, got, err, g)
	}
	old := appendString([]byte{version, kindGenesis}, "0123abcd")
	old = append(old, 2) // varint 1
	if _, got, _, err := decodeControl(old); err != nil || got.Gen != 1 || got.Base != 0 || got.Created != 1 {
		t.Fatalf("old genesis = %+v %v", got, err)
	}
	if _, _, _, err := decodeControl(g.encode()[:len(g.encode())-2]); err == nil {
		t.Fatal("a truncated genesis decoded")
	}
}

// rolling configures a bridge node to roll the log over past 64 KiB,
// checked every 100 ms.
func rolling(cfg *Config) {
	cfg.RollBytes, cfg.RollCheck = 64<<10, 100*time.Millisecond
}

// TestRollover: real nats-server and pbxsim; a bridge leads with a small
// generation size, a standby and an edge follow, SIP phones call in turn
// while one call stays up. The log rolls over under that traffic (twice
// at least): the stream holds the current generation only (its first
// message is the genesis, fewer messages and bytes than before the
// purge), the call up throughout still shows, ended calls leave no
// ghost, every node serves identical bytes and seqs under the one epoch,
// a reader from before the rollovers must take a snapshot, and a node
// that joins afterwards replays the current generation only and reaches
// the same state.
func TestRollover(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNodeWith(t, srv.URL(), "bridge-a", sim.AMIAddr(), 2*time.Second, rolling)
	waitFor(t, "bridge-a to lead", 20*time.Second, a.n.Leading)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), 2*time.Second, rolling)
	e1 := startNode(t, srv.URL(), "edge-1", "", 2*time.Second)
	waitFor(t, "live on the edge", 20*time.Second, func() bool { return live(e1.served) })
	before := e1.served.Engine().Feed().LastSeq()
	epoch := e1.n.Epoch()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	shows := func(r *Replica, exten, num string) bool {
		return strings.Contains(string(r.Engine().Snapshot().ExtensionJSON(exten)), `"counterpartNum":"`+num+`"`)
	}
	long, err := startPhone(t, sim, "203").Call(ctx, "699")
	if err != nil {
		t.Fatal(err)
	}
	defer long.Hangup(ctx)
	waitFor(t, "203's call on the edge", 10*time.Second, func() bool { return shows(e1.served, "203", "699") })
	// The call up throughout never disappears from the edge's state (a
	// webhook would send its hangup), nor does the edge stop being ready.
	var gone, unready atomic.Int64
	var stale []time.Duration // how long each rollover showed the state stale
	watch, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var since time.Time
		for watch.Err() == nil {
			if !shows(e1.served, "203", "699") {
				gone.Add(1)
			}
			if !e1.n.Ready() {
				unready.Add(1)
			}
			switch b := e1.served.building(); {
			case b && since.IsZero():
				since = time.Now()
			case !b && !since.IsZero():
				stale = append(stale, time.Since(since).Round(time.Millisecond))
				since = time.Time{}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var most, mostBytes uint64 // the most messages and bytes the stream held
	phones := []string{"201", "202"}
	ph := []*pbxsim.Phone{startPhone(t, sim, "201"), startPhone(t, sim, "202")}
	placed := 0
	for i := 0; ; i++ {
		g, _ := e1.n.gen.get()
		if g.Gen >= 3 && i%2 == 0 {
			break
		}
		if i > 800 {
			t.Fatalf("after %d calls the log is at generation %d", placed, g.Gen)
		}
		from := phones[i%2]
		call, err := ph[i%2].Call(ctx, "6"+from[1:])
		if err != nil {
			t.Fatal(err)
		}
		placed++
		waitFor(t, from+"'s call on the edge", 10*time.Second, func() bool { return shows(e1.served, from, "6"+from[1:]) })
		call.Hangup(ctx)
		<-call.Done()
		if info, err := a.n.stream.Info(ctx); err == nil {
			most, mostBytes = max(most, info.State.Msgs), max(mostBytes, info.State.Bytes)
		}
	}
	stopWatch()
	<-watched
	if gone.Load() != 0 || unready.Load() != 0 {
		t.Errorf("during the rollovers the long call was missing from the edge's state %d times, the edge not ready %d times", gone.Load(), unready.Load())
	}
	t.Logf("the edge's state was stale (resyncing) for %v during the rollovers", stale)
	g, genSeq := e1.n.gen.get()
	t.Logf("%d calls: generation %d from seq %d, the stream held up to %d messages, %d bytes", placed, g.Gen, genSeq, most, mostBytes)
	if a.n.Stats().Rollovers < 2 || !a.n.Leading() || a.stopped() {
		t.Fatalf("bridge-a: %+v, stopped %v (%v)", a.n.Stats(), a.stopped(), a.err)
	}
	if g.ID != epoch || e1.n.Epoch() != epoch {
		t.Fatalf("the epoch changed: %q, want %q", g.ID, epoch)
	}
	waitFor(t, "live on the edge after the rollovers, the long call shown, no ghost", 20*time.Second, func() bool {
		return live(e1.served) && shows(e1.served, "203", "699") && !shows(e1.served, "201", "601") && !shows(e1.served, "202", "602")
	})
	waitFor(t, "identical state on the three nodes", 10*time.Second, func() bool {
		return same(a.served, e1.served) && same(b.served, e1.served)
	})
	if _, ok := e1.served.Engine().Feed().Since(before); ok {
		t.Fatal("a reader from before the rollovers resumed: it must take a snapshot")
	}
	// The stream holds the current generation only.
	var info = func() (first, msgs, bytes uint64) {
		i, err := a.n.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return i.State.FirstSeq, i.State.Msgs, i.State.Bytes
	}
	waitFor(t, "the old generations purged", 10*time.Second, func() bool {
		first, _, _ := info()
		_, seq := e1.n.gen.get()
		return first == seq
	})
	first, msgs, size := info()
	t.Logf("the stream after the rollovers: first seq %d, %d messages, %d bytes", first, msgs, size)
	if msgs >= most || size >= mostBytes {
		t.Errorf("the stream holds %d messages, %d bytes: not fewer than before the rollovers (%d, %d)", msgs, size, most, mostBytes)
	}

	// A node that starts now replays the current generation only.
	e2 := startNode(t, srv.URL(), "edge-2", "", 2*time.Second)
	waitFor(t, "identical state on the new edge", 20*time.Second, func() bool { return same(e1.served, e2.served) })
	st := e2.n.Stats()
	if st.Applied > st.AppliedSeq-first+1 || st.Generation != e1.n.Stats().Generation || e2.n.Epoch() != epoch {
		t.Fatalf("the new edge applied %d messages up to seq %d (the generation starts at %d), generation %d; epoch %q", st.Applied, st.AppliedSeq, first, st.Generation, e2.n.Epoch())
	}
	t.Logf("the new edge applied %d messages (the stream's last seq %d)", st.Applied, st.AppliedSeq)
}

// TestRolloverLeaderKilled: the leader is cut right after its genesis is
// stored (during the rollover's resync); the standby takes over cleanly:
// same generation, live, identical state with the edge, the old
// generation purged, a new call shown.
func TestRolloverLeaderKilled(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	const ttl = 2 * time.Second
	noSize := func(cfg *Config) { cfg.RollCheck = 100 * time.Millisecond; cfg.RollBytes = -1 }
	a := startNodeWith(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl, noSize)
	waitFor(t, "bridge-a to lead", 20*time.Second, a.n.Leading)
	b := startNodeWith(t, srv.URL(), "bridge-b", sim.AMIAddr(), ttl, noSize)
	e := startNode(t, srv.URL(), "edge-1", "", ttl)
	waitFor(t, "live on the edge", 20*time.Second, func() bool { return live(e.served) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := callShown(ctx, t, sim, e)
	defer call.Hangup(ctx)

	a.n.cfg.LinkPBX.ask() // as rolling does once the generation is full
	waitFor(t, "the new generation on the edge", 10*time.Second, func() bool { g, _ := e.n.gen.get(); return g.Gen == 2 })
	wasLive := live(e.served)
	a.kill()
	waitFor(t, "bridge-b to lead", 15*time.Second, b.n.Leading)
	waitFor(t, "live again on the edge, the call shown", 20*time.Second, func() bool {
		return live(e.served) && strings.Contains(string(e.served.Engine().Snapshot().ExtensionJSON("201")), `"counterpartNum":"601"`)
	})
	waitFor(t, "identical state on bridge-b and the edge", 10*time.Second, func() bool { return same(b.served, e.served) })
	gb, _ := b.n.gen.get()
	ge, seq := e.n.gen.get()
	if gb != ge || ge.Gen != 2 {
		t.Fatalf("generations: bridge-b %+v, edge %+v", gb, ge)
	}
	waitFor(t, "the old generation purged by bridge-b", 10*time.Second, func() bool {
		i, err := b.n.stream.Info(ctx)
		return err == nil && i.State.FirstSeq == seq
	})
	if b.stopped() || e.stopped() {
		t.Fatalf("a node stopped: bridge-b %v, edge %v", b.err, e.err)
	}
	t.Logf("the edge was live when the leader was cut: %v", wasLive)
	call.Hangup(ctx)
	callShown(ctx, t, sim, e).Hangup(ctx)
}

// TestRolloverFenced: a leader whose stream another leader wrote to
// (a lead record after its last seq) asks for a rollover: its genesis is
// refused like any publish, it steps down (ErrDeposed), and nothing is
// purged.
func TestRolloverFenced(t *testing.T) {
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNodeWith(t, srv.URL(), "bridge-a", sim.AMIAddr(), 2*time.Second, func(cfg *Config) { cfg.RollBytes = -1 })
	waitFor(t, "bridge-a to lead, live", 20*time.Second, func() bool { return a.n.Leading() && live(a.served) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := a.n.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := lead{Node: "bridge-x", Fingerprint: a.n.cfg.Fingerprint}.encode()
	ack, err := a.n.js.Publish(ctx, a.n.subject, other, jetstream.WithExpectLastSequence(info.State.LastSeq))
	if err != nil {
		t.Fatal(err)
	}
	// Its genesis is fenced (whether or not a batch of its link was
	// refused first), and the rollover the link asks too.
	if _, err := a.n.publishGenesis(); err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("a genesis after another leader's record: %v, want fenced off", err)
	}
	a.n.cfg.LinkPBX.ask()
	waitFor(t, "bridge-a to step down", 10*time.Second, a.stopped)
	if !errors.Is(a.err, ErrDeposed) {
		t.Fatalf("bridge-a stopped with %v, want ErrDeposed", a.err)
	}
	info, err = a.n.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.FirstSeq != 1 || info.State.LastSeq != ack.Sequence {
		t.Fatalf("after the fenced rollover the stream holds seqs %d to %d, want 1 to %d (nothing purged, nothing after the other leader's record)", info.State.FirstSeq, info.State.LastSeq, ack.Sequence)
	}
	if g, _ := a.n.gen.get(); g.Gen != 1 || a.n.Stats().Rollovers != 0 {
		t.Fatalf("generation %d, rollovers %d", g.Gen, a.n.Stats().Rollovers)
	}
}

// TestGenesisWhileShadowing: the next genesis comes while the served
// replica still builds the generation before (its resync never seen live
// here: a stall marker after it, the leader live and rolling over
// again). That generation is adopted as it is, not dropped: the engine's
// feed holds its changes (calls.Feed.Generation), which the webhooks
// replay, and the new generation is built on a new shadow.
func TestGenesisWhileShadowing(t *testing.T) {
	rl := recordRolled(t, readRecording(t, "../ami/testdata/load_10_calls_5cps.ami"), readRecording(t, "../ami/testdata/basic_call_caller_hangup.ami"))
	log, at, g2, clock := rl.log, rl.at, rl.g, rl.clock
	if at+2 > len(log) {
		t.Fatalf("genesis at %d of %d messages", at, len(log))
	}
	r := NewReplica(engineConfig())
	replayLog(t, r, log[:at+2]) // the genesis and a message of its resync
	if r.shadow == nil {
		t.Fatal("the new generation was adopted a message after its genesis: the test needs it built still")
	}
	want := r.shadow.Engine().Feed().LastSeq()
	r.stall(clock)
	g3 := genesis{ID: "epoch", Created: clock.UnixMilli(), Gen: 3, Base: want + baseGap}
	r.generation(g3)
	base, cs, ok := r.Engine().Feed().Generation()
	if !ok || base != g2.Base || len(cs) == 0 || cs[len(cs)-1].Seq <= want {
		t.Fatalf("after the next genesis: generation base %d (want %d), %d changes up to %d, ok %v; want generation 2's, to past %d", base, g2.Base, len(cs), r.Engine().Feed().LastSeq(), ok, want)
	}
	if r.shadow == nil || r.shadow.Engine().Snapshot().Seq != g3.Base {
		t.Fatal("generation 3 is not being built")
	}
}
