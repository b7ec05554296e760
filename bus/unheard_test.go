package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest"
	"github.com/ctibridge/ctibridge/calls"
)

// showsCall reports whether snapshot s shows exten's call to num.
func showsCall(s *calls.Snapshot, exten, num string) bool {
	return strings.Contains(string(s.ExtensionJSON(exten)), `"counterpartNum":"`+num+`"`)
}

// TestUnheardServerKilled: the NATS server an edge's ordered consumer is
// on is killed (SIGKILL) while a call is up, and the call hangs up. The
// edge hears nothing until its consumer is restarted, and while the
// stream elects a JetStream leader nobody can store a stall marker: its
// clients must be told the state is stale on the edge's own say
// (State: stalled, at the engine's seq), within a bound, and live again
// with the leader's state once it hears the stream. Before, the ended
// call was shown live for the election and two watchdog checks more.
func TestUnheardServerKilled(t *testing.T) {
	const ttl = 2 * time.Second
	cluster, sim, a, e := startLeaderEdge(t, ttl)
	st := e.n.State()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	call, err := startPhone(t, sim, "201").Call(ctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "201's call on the edge", 10*time.Second, func() bool { return showsCall(st.Snapshot(), "201", "601") })
	if s := st.Snapshot(); s.Unheard || s.Stale || e.n.Unheard() {
		t.Fatalf("the edge says it cannot hear its stream before any kill: %+v", s.Link)
	}
	// The worst case: the consumer on the stream's JetStream leader, so
	// that the stream elects one while the consumer is gone. The
	// consumer is placed by the servers: restart it until it is there.
	var consOn, leader string
	for try := 0; try < 20; try++ {
		cons := *e.n.consumer.Load()
		info, err := cons.Info(ctx)
		sinfo, serr := e.n.stream.Info(ctx)
		if err != nil || serr != nil || info.Cluster == nil || sinfo.Cluster == nil {
			t.Fatalf("the edge's consumer and stream: %v %v", err, serr)
		}
		if consOn, leader = info.Cluster.Leader, sinfo.Cluster.Leader; consOn == leader {
			break
		}
		e.n.reconnect(nil) // a new consumer
		waitFor(t, "a new consumer", 10*time.Second, func() bool { return *e.n.consumer.Load() != cons })
	}
	var victim *natstest.Server
	for _, s := range cluster {
		if s.Name == consOn {
			victim = s
		}
	}
	if victim == nil {
		t.Fatalf("the edge's consumer is on %q, none of the servers", consOn)
	}
	moveLeaseLeader(ctx, t, a.n, cluster, victim)
	t.Logf("killing %s: the edge's consumer's server (the stream's leader: %s)", victim.Name, leader)
	victim.Kill()
	defer victim.Restart()
	call.Hangup(ctx)
	hungUp := time.Now()

	// Until the edge shows the hangup, live: every sample that shows
	// the ended call as live is stale state shown as live (summed: also
	// while the stream, its election over, has not stored the leader's
	// retried publish yet, which no node can know of).
	var ghostLive, unheardAt time.Duration
	prev := time.Now()
	waitFor(t, "the hangup shown live on the edge", 60*time.Second, func() bool {
		now := time.Now()
		defer func() { prev = now }()
		base := e.served.Engine().Snapshot()
		s := st.Snapshot()
		if s.Unheard {
			if unheardAt == 0 {
				unheardAt = time.Since(hungUp)
			}
			if s.Seq < base.Seq || s.Link == calls.LinkLive || !s.Stale {
				t.Fatalf("an unheard snapshot: seq %d (the engine's %d), link %v, stale %v", s.Seq, base.Seq, s.Link, s.Stale)
			}
		}
		shown := showsCall(s, "201", "601")
		if shown && !s.Stale {
			ghostLive += now.Sub(prev)
		}
		return !shown && !s.Stale
	})
	t.Logf("the ended call shown live on the edge for %v after the hangup; the edge unheard %v after it (0: never)",
		ghostLive.Round(time.Millisecond), unheardAt.Round(time.Millisecond))
	if limit := 3 * ttl / 2; ghostLive > limit {
		t.Errorf("the ended call was shown live for %v after the hangup, want at most %v", ghostLive.Round(time.Millisecond), limit)
	}
	waitFor(t, "the edge heard again, live, in the bridge's state", 30*time.Second, func() bool {
		return !e.n.Unheard() && !st.Snapshot().Unheard && live(e.served) && same(a.served, e.served)
	})
	if !e.n.Ready() {
		t.Error("the edge, hearing its stream again and live, is not ready")
	}
	if a.stopped() || !a.n.Leading() {
		t.Errorf("bridge-a stopped leading after a NATS server died: %v", a.err)
	}
}

// TestUnheardDisconnected: an edge whose NATS connection drops says at
// once that it cannot hear its stream, not ready; on the reconnect its
// consumer is restarted and it is heard again with the leader's state.
func TestUnheardDisconnected(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natstest.Start(t)
	sim := startSim(t)
	a := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), ttl)
	waitFor(t, "bridge-a to lead", 30*time.Second, a.n.Leading)
	e := startNode(t, srv.URL(), "edge-1", "", ttl)
	waitFor(t, "the edge ready", 20*time.Second, func() bool { return e.n.Ready() && same(a.served, e.served) })
	changed := e.n.State().LocalChanged()
	before := e.served.Engine().Feed().LastSeq()
	cons := *e.n.consumer.Load()
	if err := e.n.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change of the edge's own say within 5 s of its disconnect")
	}
	// The reconnect may be quick: what changed first was unheard.
	if e.served.Engine().Feed().LastSeq() != before {
		t.Errorf("the edge's feed moved (seq %d to %d): being unheard must not change it", before, e.served.Engine().Feed().LastSeq())
	}
	waitFor(t, "the edge heard again and ready", 10*time.Second, func() bool { return !e.n.Unheard() && e.n.Ready() })
	// Nothing was published: only the reconnect restarts the consumer.
	waitFor(t, "a new consumer after the reconnect", 2*time.Second, func() bool { return *e.n.consumer.Load() != cons })
	if st := e.n.Stats(); st.UnheardTimes < 1 {
		t.Errorf("stats after a disconnect: %+v", st)
	}
}

// TestHearingCheck: what one check of the stream's info says.
func TestHearingCheck(t *testing.T) {
	errInfo := errors.New("nats: timeout")
	type step struct {
		last    uint64
		err     error
		applied uint64
		want    verdict
		silent  bool
	}
	for name, steps := range map[string][]step{
		"caught up":            {{10, nil, 10, heard, false}, {12, nil, 12, heard, false}},
		"behind, then applied": {{12, nil, 10, undecided, false}, {13, nil, 12, heard, false}, {13, nil, 13, heard, false}},
		// A busy stream: the last message always on its way.
		"busy": {{11, nil, 10, undecided, false}, {13, nil, 12, heard, false}, {15, nil, 14, heard, false}},
		// Behind a check ago and since, but applying: a slow replay.
		"behind, applying": {{30, nil, 10, undecided, false}, {40, nil, 11, undecided, false}, {50, nil, 25, undecided, false}, {50, nil, 45, undecided, false}, {50, nil, 50, heard, false}},
		// A message stored a check ago not applied, nothing applied.
		"silent":       {{12, nil, 10, undecided, false}, {12, nil, 10, deaf, true}},
		"one info err": {{10, nil, 10, heard, false}, {0, errInfo, 10, undecided, false}, {10, nil, 10, heard, false}},
		"two info err": {{0, errInfo, 10, undecided, false}, {0, errInfo, 10, deaf, false}, {0, errInfo, 10, deaf, false}, {11, nil, 11, heard, false}},
		// Behind only since this check (a publish in flight): heard.
		"just stored": {{10, nil, 10, heard, false}, {11, nil, 10, heard, false}, {11, nil, 10, deaf, true}},
	} {
		h := hearing{applied: steps[0].applied}
		for i, s := range steps {
			v, why, silent := h.check(s.last, s.err, s.applied)
			if v != s.want || silent != s.silent || (v == deaf) != (why != "") {
				t.Errorf("%s, step %d: check(%d, %v, %d) = %v %q %v, want %v %v", name, i, s.last, s.err, s.applied, v, why, silent, s.want, s.silent)
			}
		}
	}
}

// TestUnheardView: the unheard snapshot is the engine's at the same seq
// and version, stalled and stale, made once per snapshot; heard again,
// the engine's own.
func TestUnheardView(t *testing.T) {
	r := NewReplica(calls.Config{})
	if err := r.Replay([]byte{version, kindOps, opSetLink, 2, byte(calls.LinkLive), opPublish, 0}); err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{Served: r}}
	st := n.State()
	base := r.Engine().Snapshot()
	if st.Snapshot() != base {
		t.Fatal("a heard node's snapshot is not the engine's")
	}
	changed := st.LocalChanged()
	n.unheard.set(sayDeaf, true)
	select {
	case <-changed:
	default:
		t.Fatal("LocalChanged not closed when the node went unheard")
	}
	s := st.Snapshot()
	if !s.Unheard || !s.Stale || s.Link != calls.LinkStalled || s.Seq != base.Seq || s.Version != base.Version {
		t.Fatalf("unheard snapshot: %+v, the engine's seq %d version %d", s, base.Seq, base.Version)
	}
	if !strings.Contains(string(s.StatusJSON()), `"pbx":"stalled"`) || strings.Contains(string(base.StatusJSON()), "stalled") {
		t.Errorf("status: unheard %s, the engine's %s", s.StatusJSON(), base.StatusJSON())
	}
	if st.Snapshot() != s {
		t.Error("the unheard snapshot made again for the same engine snapshot")
	}
	if r.Engine().Feed().LastSeq() != base.Seq {
		t.Error("going unheard changed the feed")
	}
	changed = st.LocalChanged()
	n.unheard.set(sayDeaf, false)
	<-changed
	if st.Snapshot() != base {
		t.Error("heard again, the snapshot is not the engine's")
	}
}
