package bus

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the JetStream KV bucket of the leases: one key per PBX,
// the PBX's name, whose value names the node that leads it.
const LeaseBucket = "ctibridge_leases"

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 3 * time.Second

// fenceBound is how long after it sent its last stored write of the
// lease (the win or a renewal) a leader may act on the PBX: ttl less
// ttl/6 (2.5 s at the default TTL), against a standby's takeover no
// sooner than ttl after that write was stored (docs/scale-out.md,
// "Fencing: a cut-off leader steps down first").
func fenceBound(ttl time.Duration) time.Duration { return ttl - ttl/6 }

// lease is the election of the bridge that holds a PBX's AMI link: a key
// per PBX in the JetStream KV bucket LeaseBucket, whose value names the
// leader. The leader rewrites it every ttl/3 with a compare-and-set on
// the revision it last wrote; a candidate, reading it every ttl/30 (so
// that it sees a renewal, and the stand-still's end, within 100 ms at the
// default TTL: read every ttl/6, a takeover came at ttl+ttl/6 whenever the
// sixth read found 2.999 s elapsed), that sees the revision stand still
// for ttl takes it with a compare-and-set on the revision it saw, so one
// candidate at most wins, and a leader whose rewrite fails on the
// revision has been replaced. A leader that cannot rewrite (NATS out of
// reach, a JetStream election) keeps trying until its grant ends (then it
// steps down: fence.go), and a candidate whose
// takeover write fails so (not on the revision), or who finds the
// bucket's JetStream leader changed during the stand-still (the
// election is over, but the holder could not renew during it), counts
// the stand-still again from then; should a candidate take over meanwhile, the leader's
// next rewrite or publish is refused on the revision or the stream's
// last seq, and it steps down then.
//
// The bucket's JetStream leader is read (a stream-info request) once a
// stand-still has lasted ttl/2, and again at ttl before a takeover: a
// renewed lease costs a standby one KV read every ttl/30 and nothing
// more (leaderChecks counts the stream-info requests). The holder had
// the second half of the stand-still under one JetStream leader, time
// for one renewal at least (it tries every ttl/3, each until its grant
// ends, when it steps down), so a revision still standing at ttl is its
// failure, not the election's.
//
// Fencing (fence.go): the leader may act on the PBX only until
// fenceBound after it sent its last write of the lease that was stored
// (granted); the term it won the lease at is the fencing token every
// action is checked against (check), and a grant that ran out steps the
// node down for good (fence).
//
// A preferred candidate (Config.Prefer, handover.go) that sees the lease
// renewed by another asks that leader to hand it over; a leader that
// agrees rewrites the lease naming the candidate (transfer), which takes
// it with a compare-and-set on that revision. A standby that offered to
// lead when the leader's link was down (invite, yield.go) takes a lease
// naming it so too.
type lease struct {
	kv   jetstream.KeyValue
	key  string
	node string
	ttl  time.Duration
	log  *slog.Logger
	rev  uint64 // the revision this node wrote last, while leading
	// ask, on a preferred candidate, asks holder to hand the lease over
	// (handover.go); false when it neither asked nor probed the PBX (not
	// caught up).
	ask   func(ctx context.Context, holder string) bool
	asked time.Time // when this node last asked
	// invited: when this standby last offered to take the lead of a
	// leader whose link is down (yield.go; unix ns, set from a NATS
	// callback).
	invited atomic.Int64
	// handedIn: the lease was won by a handover (the old leader stepped
	// down at a batch's end and said resyncing).
	handedIn bool
	// handTo, while leading, takes a transfer to the named node:
	// keep rewrites the lease naming it, answers the write's error and
	// stops renewing.
	handTo       chan transfer
	leaderChecks *atomic.Uint64 // stream-info requests for the bucket's leader

	gmu sync.Mutex // guards term, until and fenced: the grant actions check
	// term is the fencing token: the revision this node won the lease
	// at (revisions grow, so a later leader's term is larger); 0 before.
	term uint64
	// until: the lease's expiry on this node's clock, fenceBound after
	// the last stored write was sent.
	until time.Time
	// fenced: the lease is not this node's to act on any more (expired,
	// handed over or released); no renewal gives it back.
	fenced bool
}

// granted notes a stored write of the lease sent at sent: the win
// (term is its revision) or a renewal (term 0 keeps it).
func (l *lease) granted(term uint64, sent time.Time) {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	if l.fenced {
		return
	}
	if term != 0 {
		l.term = term
	}
	l.until = sent.Add(fenceBound(l.ttl))
}

// grant is the fencing token and the lease's local expiry.
func (l *lease) grant() (term uint64, until time.Time) {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	return l.term, l.until
}

// check says whether an action stamped with term may be sent to the
// PBX now: term is this node's, not fenced, the lease unexpired.
func (l *lease) check(term uint64) error {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	if l.fenced || term == 0 || term != l.term || !time.Now().Before(l.until) {
		return ErrStaleLease
	}
	return nil
}

// fence ends the grant for good; it reports whether it was still on.
func (l *lease) fence() bool {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	was := !l.fenced
	l.fenced = true
	return was
}

// transfer asks keep to hand the lease to node.
type transfer struct {
	node string
	done chan error
}

// contend runs until ctx ends: it sends on won once this node holds the
// lease, then keeps it, sending on lost when it cannot.
func (l *lease) contend(ctx context.Context, won chan<- uint64, lost func(error)) {
	tick := time.NewTicker(l.ttl / 30)
	defer tick.Stop()
	var seen uint64
	var since time.Time
	var leader string // the bucket's JetStream leader at ttl/2 of the stand-still
	checked := false  // leader read for this stand-still
	for l.rev == 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, l.ttl/3)
		e, err := l.kv.Get(c, l.key)
		sent := time.Now() // before any write below: the grant counts from it
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			// Nobody leads (first start, or the leader let go).
			if rev, err := l.kv.Create(c, l.key, []byte(l.node)); err == nil {
				l.rev = rev
			}
		case err != nil:
			// NATS out of reach or electing: the leader may be renewing
			// fine elsewhere. Count the stand-still from when it is seen
			// again, so a cluster election does not depose a live leader.
			since, checked = time.Now(), false
		case string(e.Value()) == l.node && (time.Since(l.asked) < 2*l.ttl || l.invitedLately()):
			// Handed over to this node: take it on the holder's revision.
			if rev, err := l.kv.Update(c, l.key, []byte(l.node), e.Revision()); err == nil {
				l.rev, l.handedIn = rev, true
			}
		case e.Revision() != seen:
			seen, since, checked = e.Revision(), time.Now(), false
			if l.ask != nil && string(e.Value()) != l.node && time.Since(l.asked) >= l.ttl {
				// Another renews it: ask it to hand over, at most once a
				// TTL (an answer lost, the lease may name this node still).
				if at := time.Now(); l.ask(c, string(e.Value())) {
					l.asked = at
				}
			}
		case !checked && time.Since(since) >= l.ttl/2:
			leader, checked = l.bucketLeader(c), true
		case checked && time.Since(since) >= l.ttl:
			if now := l.bucketLeader(c); now == "" || now != leader {
				// The bucket's JetStream leader changed during the
				// stand-still (or none answers): while it was elected
				// nobody could write, the holder's renewals failed though
				// its reads came from the replicas. Give it a TTL to
				// renew under the new leader.
				since, checked = time.Now(), false
				break
			}
			l.log.Warn("lease not renewed: taking over", "holder", string(e.Value()), "for", time.Since(since).Round(time.Millisecond))
			sent = time.Now()
			rev, err := l.kv.Update(c, l.key, []byte(l.node), seen)
			switch {
			case err == nil:
				l.rev = rev
			case !isWrongSeq(err):
				// The bucket takes no write (its JetStream leader died and
				// the election is on: reads still come from the replicas),
				// so the leader cannot renew either: count its stand-still
				// again from now, or a NATS server's death deposes it.
				since, checked = time.Now(), false
			}
		}
		cancel()
		if l.rev != 0 {
			l.granted(l.rev, sent)
		}
	}
	won <- l.rev
	l.keep(ctx, lost)
}

// invite notes that this standby offered to take the lead (yield.go):
// for 2·ttl, a lease naming it is taken as a handover.
func (l *lease) invite() { l.invited.Store(time.Now().UnixNano()) }

func (l *lease) invitedLately() bool {
	return time.Since(time.Unix(0, l.invited.Load())) < 2*l.ttl
}

// bucketLeader names the JetStream leader of the lease bucket's stream:
// "" when none answers (an election, NATS out of reach), "-" for a
// bucket with no cluster (a single server).
func (l *lease) bucketLeader(ctx context.Context) string {
	l.leaderChecks.Add(1)
	st, err := l.kv.Status(ctx)
	if err != nil {
		return ""
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil || bs.StreamInfo().Cluster == nil {
		return "-"
	}
	return bs.StreamInfo().Cluster.Leader // "" while it has none
}

// keep renews the lease every ttl/3 until ctx ends or it is lost. A
// renewal waits for its answer until the grant ends (ttl/3 at least): on
// a slow NATS a write answered late still extends it. A write whose
// answer was lost but that was stored is found by ownWrite at the next
// try; it extends the grant from when the first unanswered try since the
// last answered one was sent (the stored write was sent then or later).
func (l *lease) keep(ctx context.Context, lost func(error)) {
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	var tried time.Time // the first unanswered try since the last answer
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-l.handTo:
			h.done <- l.handOver(ctx, h.node)
			return
		case <-tick.C:
		}
		_, until := l.grant()
		c, cancel := context.WithTimeout(ctx, max(l.ttl/3, time.Until(until)))
		sent := time.Now()
		rev, err := l.kv.Update(c, l.key, []byte(l.node), l.rev)
		cancel()
		switch {
		case err == nil:
			l.rev, tried = rev, time.Time{}
			l.granted(0, sent)
		case isWrongSeq(err):
			if l.ownWrite(ctx) {
				if !tried.IsZero() {
					l.granted(0, tried)
				}
				tried = time.Time{}
				continue
			}
			lost(errors.New("the lease was taken by another node"))
			return
		default:
			if tried.IsZero() {
				tried = sent
			}
			l.log.Warn("lease not renewed, retrying", "err", err)
		}
	}
}

// handOver rewrites the lease naming node, on this leader's revision.
// Done, the lease is not this node's to release any more.
func (l *lease) handOver(ctx context.Context, node string) error {
	l.fence()
	c, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	_, err := l.kv.Update(c, l.key, []byte(node), l.rev)
	if err == nil {
		l.rev = 0
	}
	return err
}

// release lets the lease go at a clean stop, so that a standby takes over
// at once instead of after ttl.
func (l *lease) release() {
	l.fence()
	if l.rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
}

// ownWrite reports whether the lease still names this node after a
// rewrite was refused on the revision: a rewrite whose answer was lost
// (a timeout) moved the revision itself. It adopts that revision.
func (l *lease) ownWrite(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	e, err := l.kv.Get(c, l.key)
	if err != nil || string(e.Value()) != l.node {
		return false
	}
	l.rev = e.Revision()
	return true
}
