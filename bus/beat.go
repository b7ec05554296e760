package bus

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// The leader's heartbeat (docs/scale-out.md, "The leader's heartbeat:
// stale within a bound"). A stall marker (stall.go) needs the lease to
// stand still for LeaseTTL/2 and a stream write, and a node's own
// checks (unheard.go) read the stream every LeaseTTL/6: for 1.5 to 2.5 s
// after a leader's death every node served its last state as live. So
// the leader says it is alive, and how far it has published, on core
// NATS: every beatEvery (LeaseTTL/12, 250 ms by default) it publishes on
// ctibridge.<pbx>.beat the last stream seq it stored. It beats only
// while its publishes go through: a beat takes the publish lock, so a
// publish retried (NATS out of reach, an election) holds the beats up
// too.
//
// Every node hears the beats and, on a timer (not when the next message
// comes), says on its own that the state is stale (the unheard say,
// reason late) when
//
//   - no beat came for beatLate (LeaseTTL/4, 750 ms: three beats), or
//   - a beat announced a seq that the node has not applied beatLate
//     after it came (the node, or its consumer, is behind);
//
// and says it is live again only once a beat came within beatLate and
// the node has applied the seq of the latest beat it heard: never the
// old state as live before it caught up with what the leader has
// published. A node starts so (stale, reason late) until its first beat
// came and that beat's seq is applied: a node restarted while its
// leader publishes replays the stream, and was live from the replay's
// first live link on (a restarted edge showed calls ended since the
// restart as up, live, for 1.2 s). So a node is stale at most beatLate after the leader's last
// beat (plus the timer's lateness), against 1.5 to 2.5 s before.

// beatSubject is where a PBX's leader beats.
func beatSubject(pbx string) string { return "ctibridge." + pbx + ".beat" }

// beatEvery is how often the leader beats, beatLate how long after the
// last beat (or after a beat whose seq is not applied) a node says its
// state is stale.
func beatEvery(ttl time.Duration) time.Duration { return ttl / 12 }
func beatLate(ttl time.Duration) time.Duration  { return ttl / 4 }

// kindBeat is a heartbeat's kind byte (core NATS, not the stream).
const kindBeat = 5

func encodeBeat(node string, seq uint64) []byte {
	b := []byte{version, kindBeat}
	b = appendString(b, node)
	return binary.AppendUvarint(b, seq)
}

func decodeBeat(data []byte) (node string, seq uint64, err error) {
	d := decoder{b: data}
	if k := d.header(); d.err == nil && k != kindBeat {
		d.fail("kind %d is not a heartbeat", k)
	}
	node, seq = d.string(), d.uvarint()
	return node, seq, d.err
}

// beating publishes the leader's heartbeat until ctx ends (a leader's
// goroutine, from its lead record on).
func (n *Node) beating(ctx context.Context) {
	subj := beatSubject(n.cfg.PBX)
	tick := time.NewTicker(beatEvery(n.cfg.LeaseTTL))
	defer tick.Stop()
	for {
		// The publish lock: held through a publish's retries, so that no
		// beat says the leader publishes while it cannot.
		n.pubMu.Lock()
		seq := n.pubSeq
		n.pubMu.Unlock()
		if ctx.Err() != nil || !n.leading.Load() {
			return
		}
		n.nc.Publish(subj, encodeBeat(n.cfg.Node, seq))
		n.m.beatsSent.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pulse is what a node heard of the leader's heartbeat.
type pulse struct {
	mu    sync.Mutex
	last  time.Time // when the last beat came (Run's start before any)
	node  string    // the leader whose beats came last
	seq   uint64    // the highest seq its beats announced
	due   time.Time // when a beat came whose seq is not applied yet; zero none
	late  bool      // the node says its state is stale for the heartbeat
	heard bool      // a beat came since Run's start
	// watch: due set or late (apply takes the lock only then).
	watch atomic.Bool
}

// listen subscribes to the leader's heartbeat and judges it on wg until
// ctx ends (Run's).
func (n *Node) listen(ctx context.Context, wg *sync.WaitGroup) error {
	p := &n.pulse
	p.mu.Lock()
	p.last = time.Now()
	// Stale until the first beat's seq is applied (above).
	p.late = true
	p.watch.Store(true)
	n.unheard.set(sayLate, true)
	p.mu.Unlock()
	n.log.Info("waiting for the leader's first heartbeat: clients are told the state is stale until its seq is applied")
	sub, err := n.nc.Subscribe(beatSubject(n.cfg.PBX), n.onBeat)
	if err != nil {
		return fmt.Errorf("bus: the leader's heartbeat: %w", err)
	}
	wg.Go(func() {
		defer sub.Unsubscribe()
		n.judgePulse(ctx)
	})
	return nil
}

// onBeat is the heartbeat subscription's callback. The say is changed
// under the pulse's lock, so that a lift and a mark cannot cross.
func (n *Node) onBeat(m *nats.Msg) {
	node, seq, err := decodeBeat(m.Data)
	if err != nil {
		n.log.Warn("a heartbeat that does not decode", "err", err)
		return
	}
	p := &n.pulse
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if node != p.node {
		// Another leader: its seq, even below the last one's (a stream
		// made again by hand).
		p.node, p.seq = node, seq
	}
	p.last, p.seq, p.heard = now, max(p.seq, seq), true
	applied := n.applied.Load()
	switch {
	case applied >= p.seq:
		p.due = time.Time{}
	case p.due.IsZero():
		p.due = now
	}
	if p.late && applied >= p.seq {
		p.late = false
		n.sayLate(false, "", node, seq)
	}
	p.watch.Store(p.late || !p.due.IsZero())
}

// caughtUp is apply's part (Run's goroutine, after each message): the
// node applied seq; a late node that has reached the latest beat's seq
// is live again, if the beats come.
func (n *Node) caughtUp(seq uint64) {
	p := &n.pulse
	if !p.watch.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq < p.seq {
		return
	}
	p.due = time.Time{}
	if p.late && p.heard && time.Since(p.last) < beatLate(n.cfg.LeaseTTL) {
		p.late = false
		n.sayLate(false, "", p.node, seq)
	}
	p.watch.Store(p.late)
}

// judgePulse says the state is stale when the heartbeat is late or its
// seq not applied in time: a timer set to the earliest such deadline.
func (n *Node) judgePulse(ctx context.Context) {
	late := beatLate(n.cfg.LeaseTTL)
	t := time.NewTimer(late)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := &n.pulse
		p.mu.Lock()
		now := time.Now()
		deadline := p.last.Add(late)
		why := "the leader's heartbeat is late"
		if !p.due.IsZero() && p.due.Add(late).Before(deadline) {
			deadline = p.due.Add(late)
			why = "the leader's last heartbeat announced a seq not applied in time"
		}
		if !p.late && !now.Before(deadline) {
			p.late = true
			p.watch.Store(true)
			n.sayLate(true, why+" (last beat "+now.Sub(p.last).Round(time.Millisecond).String()+" ago)", p.node, p.seq)
		}
		p.mu.Unlock()
		// A beat only moves the deadline later: the timer, set to the
		// deadline as it stood, finds the new one when it fires. While
		// late, beats and applies lift it; the timer looks again later.
		if now.Before(deadline) {
			t.Reset(deadline.Sub(now))
		} else {
			t.Reset(late)
		}
	}
}
