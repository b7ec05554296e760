package bus

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease is the election of the bridge that holds a PBX's AMI link: a key
// per PBX in the JetStream KV bucket ctibridge_leases, whose value names
// the leader. The leader rewrites it every ttl/3 with a compare-and-set on
// the revision it last wrote; a candidate that sees the revision stand
// still for ttl takes it with a compare-and-set on the revision it saw, so
// one candidate at most wins, and a leader whose rewrite fails on the
// revision has been replaced. A leader that cannot rewrite for ttl (NATS
// out of reach) steps down too: a candidate may have taken over.
type lease struct {
	kv   jetstream.KeyValue
	key  string
	node string
	ttl  time.Duration
	log  *slog.Logger
	rev  uint64 // the revision this node wrote last, while leading
}

// contend runs until ctx ends: it sends on won once this node holds the
// lease, then keeps it, sending on lost when it cannot.
func (l *lease) contend(ctx context.Context, won chan<- uint64, lost chan<- error) {
	tick := time.NewTicker(l.ttl / 6)
	defer tick.Stop()
	var seen uint64
	var since time.Time
	for l.rev == 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, l.ttl/3)
		e, err := l.kv.Get(c, l.key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			// Nobody leads (first start, or the leader let go).
			if rev, err := l.kv.Create(c, l.key, []byte(l.node)); err == nil {
				l.rev = rev
			}
		case err != nil:
		case e.Revision() != seen:
			seen, since = e.Revision(), time.Now()
		case time.Since(since) >= l.ttl:
			l.log.Warn("lease not renewed: taking over", "holder", string(e.Value()), "for", time.Since(since).Round(time.Millisecond))
			if rev, err := l.kv.Update(c, l.key, []byte(l.node), seen); err == nil {
				l.rev = rev
			}
		}
		cancel()
	}
	won <- l.rev
	l.keep(ctx, lost)
}

// keep renews the lease every ttl/3 until ctx ends or it is lost.
func (l *lease) keep(ctx context.Context, lost chan<- error) {
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	ok := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, l.ttl/3)
		rev, err := l.kv.Update(c, l.key, []byte(l.node), l.rev)
		cancel()
		switch {
		case err == nil:
			l.rev, ok = rev, time.Now()
		case isWrongSeq(err):
			lost <- errors.New("the lease was taken by another node")
			return
		case time.Since(ok) >= l.ttl:
			lost <- errors.New("the lease could not be renewed for " + l.ttl.String() + ": " + err.Error())
			return
		}
	}
}

// release lets the lease go at a clean stop, so that a standby takes over
// at once instead of after ttl.
func (l *lease) release() {
	if l.rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
}
