package bus

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctibridge/ctibridge/calls"
)

// A node that cannot hear its stream (docs/scale-out.md, "A node that
// cannot hear its stream"). A stall marker (stall.go) says for every
// node at one seq that the leader is silent; but while a NATS server is
// dead a node whose ordered consumer sat on it hears nothing, and while
// the stream elects a JetStream leader no marker can be stored. Its
// clients would be shown its last state as live. So the node says so on
// its own: it is *unheard* while
//
//   - its NATS connection is down (the disconnect callback, at once);
//   - the stream's info cannot be read twice running (no JetStream
//     leader, or out of reach: nothing can be stored or delivered); an
//     info that names no leader counts as unread (errNoLeader: a server
//     left alone of its cluster answers so after some 10 s, with the
//     last seq it holds, while no leader can store anything);
//   - the stream held, a check ago, a message not applied since, and
//     nothing was applied in between (the consumer is silent: it is
//     restarted at once; a new one gets a check, and after each restart
//     that did not help twice as many, up to 8, before it is judged).
//
// It is heard again at the first check that finds applied what the
// stream held a check before, the connection up. The consumer is
// restarted too as soon as the connection reconnects. The checks (run.go,
// watch) read the stream's info every LeaseTTL/6, with that timeout.
//
// The same say is made when the leader's heartbeat is late (beat.go):
// the node is unheard while either reason holds.
//
// Unheard is outside the engine and its feed: clients read State, whose
// Snapshot is then the engine's AsUnheard (stale, the same seq and
// version, a live link shown stalled, one that is not live as it is;
// REST says stale, ws sends every client a snapshot under
// an epoch of its own so that nobody resumes from it, and another when
// it is lifted), and Ready is false. The seqs stay the stream's: every
// node still shows the same seq for the same state.

// errNoLeader: the stream's info names no JetStream leader (above).
var errNoLeader = errors.New("the stream has no JetStream leader")

// unheard is a node's own say that it cannot hear its stream, or that
// its leader's heartbeat is late (beat.go): on while either reason is.
type unheard struct {
	on    atomic.Bool
	since atomic.Int64 // ms since the epoch it went on
	mu    sync.Mutex
	why   uint8                        // the reasons on (sayDeaf, sayLate)
	wake  chan struct{}                // closed and replaced at each change
	cache atomic.Pointer[unheardCache] // an engine snapshot and its AsUnheard
}

// The reasons of the unheard say.
const (
	sayDeaf uint8 = 1 << iota // the stream is not heard (above)
	sayLate                   // the leader's heartbeat is late (beat.go)
)

type unheardCache struct {
	s, v  *calls.Snapshot
	since int64
}

// set turns reason r on or off; it reports whether that changed the say.
func (u *unheard) set(r uint8, on bool) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	was := u.why != 0
	if on {
		u.why |= r
	} else {
		u.why &^= r
	}
	if was == (u.why != 0) {
		return false
	}
	if !was {
		u.since.Store(time.Now().UnixMilli())
	}
	u.on.Store(!was)
	if u.wake != nil {
		close(u.wake)
		u.wake = nil
	}
	return true
}

// changed is closed at the next change.
func (u *unheard) changed() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.wake == nil {
		u.wake = make(chan struct{})
	}
	return u.wake
}

// view is s, or its AsUnheard while on (made once per snapshot).
func (u *unheard) view(s *calls.Snapshot) *calls.Snapshot {
	if !u.on.Load() {
		return s
	}
	since := u.since.Load()
	if c := u.cache.Load(); c != nil && c.s == s && c.since == since {
		return c.v
	}
	v := s.AsUnheard(since)
	u.cache.Store(&unheardCache{s, v, since})
	return v
}

// setUnheard says whether the node can hear its stream, and why not.
func (n *Node) setUnheard(on bool, why string) {
	if !n.unheard.set(sayDeaf, on) {
		return
	}
	if on {
		n.m.unheard.Add(1)
		n.log.Warn("the stream is not heard: clients are told the state is stale", "why", why, "applied", n.applied.Load())
	} else {
		n.log.Info("the stream is heard again: the state is live as the stream says", "applied", n.applied.Load())
	}
}

// sayLate says whether the leader's heartbeat is late (beat.go): the
// state is stale until a beat came and its seq (from node, when known)
// is applied.
func (n *Node) sayLate(on bool, why, node string, seq uint64) {
	if on {
		n.m.late.Add(1)
	}
	if !n.unheard.set(sayLate, on) {
		return
	}
	if on {
		n.m.unheard.Add(1)
		n.log.Warn("the leader's heartbeat is late: clients are told the state is stale", "why", why, "leader", node, "applied", n.applied.Load(), "beat_seq", seq)
	} else {
		n.log.Info("the leader's heartbeat says the state is caught up: live as the stream says", "leader", node, "beat_seq", seq, "applied", n.applied.Load())
	}
}

// Unheard reports whether the node says on its own that it cannot hear
// its stream, or that its leader's heartbeat is late (above).
func (n *Node) Unheard() bool { return n.unheard.on.Load() }

// State is what clients read of the node: its Served engine, whose
// snapshot says stalled and stale while the node is unheard (above).
// It satisfies rest.State, ws.State and calls.Source.
func (n *Node) State() *State { return &State{n: n} }

// State: see Node.State.
type State struct{ n *Node }

// Snapshot is the served engine's, AsUnheard while the node is unheard.
func (s *State) Snapshot() *calls.Snapshot {
	return s.n.unheard.view(s.n.cfg.Served.Engine().Snapshot())
}

// Feed is the served engine's: being unheard is no change of it.
func (s *State) Feed() *calls.Feed { return s.n.cfg.Served.Engine().Feed() }

// LocalChanged is closed when the node goes unheard or is heard again
// (ws: every client is sent a snapshot).
func (s *State) LocalChanged() <-chan struct{} { return s.n.unheard.changed() }

// disconnected is the NATS connection's disconnect callback.
func (n *Node) disconnected(nc *nats.Conn, err error) {
	if nc.IsClosed() {
		return // Close: the node stops
	}
	why := "the NATS connection is down"
	if err != nil {
		why += ": " + err.Error()
	}
	n.setUnheard(true, why)
}

// reconnect is its reconnect callback: the consumer is restarted at once
// (watch) rather than when it is seen silent.
func (n *Node) reconnect(*nats.Conn) {
	select {
	case n.reconnected <- struct{}{}:
	default:
	}
}

// hearing is the checks of one consumer (watch): they say whether the
// node hears its stream, and when the consumer must be restarted.
type hearing struct {
	fails   int    // stream info reads failed in a row
	applied uint64 // what was applied at the last check
	prev    uint64 // the stream's last seq at the last check read; 0 none
}

// verdict is what one check says of the node's hearing.
type verdict int

const (
	undecided verdict = iota // as it was
	heard                    // nothing is stored past what was applied
	deaf                     // see unheard
)

// check takes one reading of the stream's info (its last seq, or the
// read's error err), applied what the node had applied after it. The
// node hears its stream when it applied what the stream held a check
// ago (on a busy stream the last message is often on its way: not yet
// applied is not unheard); it is deaf when it did not, and nothing came
// since the last check (silent: the consumer must be restarted).
func (h *hearing) check(last uint64, err error, applied uint64) (v verdict, why string, silent bool) {
	defer func() { h.applied = applied }()
	if err != nil {
		if h.fails++; h.fails >= 2 {
			return deaf, "the stream's info cannot be read: " + err.Error(), false
		}
		return undecided, "", false
	}
	h.fails = 0
	prev := h.prev
	h.prev = last
	switch {
	case applied >= last || prev != 0 && applied >= prev:
		return heard, "", false
	case prev != 0 && applied == h.applied:
		return deaf, "the stream is ahead and nothing comes", true
	}
	return undecided, "", false // behind, and applying (a catch-up)
}
