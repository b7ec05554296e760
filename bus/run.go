package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/calls"
)

// stored is one stream message handed to Run's goroutine.
type stored struct {
	seq  uint64
	data []byte
}

// Run follows the stream into Served until ctx ends; on a bridge node it
// also contends for the PBX's lease and, once it wins, leads: it catches
// Primary up with the stream's end, records that it leads, marks the
// state down (the old link is gone), and calls Lead. It returns ctx's
// error, ErrDeposed, or the error that stopped the following.
func (n *Node) Run(ctx context.Context) error {
	defer n.bg.Wait() // after the goroutines below: purges are started by them
	ctx, cancel := context.WithCancel(ctx)
	n.ctx = ctx
	var wg sync.WaitGroup
	// Cancel first: a Run that returns with an error (deposed) must stop
	// its goroutines, the lease's renewal among them, before it waits.
	defer func() {
		cancel()
		wg.Wait()
		n.leading.Store(false) // a Run that returned leads nothing
	}()
	msgs := make(chan stored, 256)
	wg.Go(func() { n.follow(ctx, msgs) })
	won := make(chan uint64, 1)
	var l *lease
	kv, err := n.bucket(ctx, LeaseBucket, n.stream.CachedInfo().Config.Replicas)
	if err != nil {
		return err
	}
	wg.Go(func() { n.watchLeader(ctx, kv) })
	if err := n.listen(ctx, &wg); err != nil {
		return err
	}
	if n.cfg.Primary != nil {
		l = n.newLease(kv)
		if err := n.serveYield(); err != nil {
			return err
		}
		wg.Go(func() {
			defer l.release()
			l.contend(ctx, won, n.depose)
		})
	}
	var target uint64 // stream seq to reach before leading; 0 when not taking over
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-n.deposed:
			if errors.Is(err, ErrHandedOver) || errors.Is(err, ErrLeaseExpired) {
				return err // handover.go, fence.go
			}
			n.log.Error("stepping down: this node's engine may hold ops the stream lacks", "err", err)
			return fmt.Errorf("%w: %v", ErrDeposed, err)
		case <-won:
			wg.Go(func() { n.fencing(ctx) })
			info, err := n.stream.Info(ctx)
			if err != nil {
				n.depose(err)
				continue
			}
			target = max(info.State.LastSeq, 1)
			n.log.Info("lease won: catching up before leading", "stream_seq", target, "applied", n.applied.Load())
		case m := <-msgs:
			if n.cfg.beforeApply != nil {
				n.cfg.beforeApply(m.seq)
			}
			if err := n.apply(m, !n.leading.Load()); err != nil {
				return err
			}
		}
		if target != 0 && n.applied.Load() >= target {
			if err := n.lead(ctx, &wg, target); err != nil {
				return err
			}
			target = 0
		}
	}
}

// follow consumes the stream from the message after the last applied one,
// in order, until ctx ends. The ordered consumer recreates itself when it
// notices a gap; watch restarts it from the last applied message when it
// is silent with the stream ahead (a consumer left on a NATS server that
// died is not always noticed: seen with nats-server 2.9.10) and when the
// NATS connection reconnects. watch runs for follow's whole time, so a
// consumer that does not stop when told is no check lost. follow never
// gives up on NATS (consume): a node that cannot hear its stream says so
// (unheard.go) for as long as that lasts, and goes on.
func (n *Node) follow(ctx context.Context, out chan<- stored) {
	restart := make(chan struct{}, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go n.watch(wctx, restart)
	for ctx.Err() == nil {
		n.consume(ctx, out, restart)
	}
}

// consume runs one ordered consumer until ctx ends or watch asks for a
// restart. A consumer that cannot be made (NATS out of reach, the stream
// without a JetStream leader: an outage of any length) is asked for
// again, with backoff up to maxBackoff, at once when the connection is
// back (watch asks for a restart then), until ctx ends; each try starts
// after the last applied message, so the node resumes there with no gap
// (the ordered consumer) and no message twice (apply). Its messages are
// read on a goroutine of their own and handed on here only: once told
// to restart it hands on nothing more, even from an iterator that does
// not stop (nats.go's ordered consumer may be waiting in its own reset),
// so no message of an old consumer comes after the new one's.
func (n *Node) consume(ctx context.Context, out chan<- stored, restart chan struct{}) {
	var failed time.Time // the first try that failed, zero none
	it, err := retry(ctx, time.Time{}, restart, func(ctx context.Context) (jetstream.MessagesContext, error) {
		cons, err := n.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: n.applied.Load() + 1})
		var it jetstream.MessagesContext
		if err == nil {
			if it, err = cons.Messages(); err == nil {
				n.consumer.Store(&cons)
				return it, nil
			}
		}
		if failed.IsZero() && ctx.Err() == nil {
			failed = time.Now()
			n.log.Warn("cannot make a consumer of the stream: trying again until NATS answers", "err", err, "applied", n.applied.Load())
		}
		n.m.consRetries.Add(1)
		return nil, err
	})
	if err != nil {
		return // ctx ended
	}
	// Stopped on a goroutine of Run's: nats.go's Stop waits for a reset
	// of the ordered consumer in progress, which tries until it is
	// stopped (its next try, 20 s at most) or NATS answers; the new
	// consumer must not wait for that.
	defer n.bg.Go(it.Stop)
	if !failed.IsZero() {
		n.log.Info("consumer of the stream made again", "after", time.Since(failed).Round(time.Millisecond), "applied", n.applied.Load())
	}
	select {
	case <-restart: // asked of the one before: this one is new
	default:
	}
	done := make(chan struct{})
	defer close(done)
	msgs := make(chan stored)
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				n.log.Warn("following the stream", "err", err)
				continue
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			select {
			case msgs <- stored{seq: md.Sequence.Stream, data: m.Data()}:
			case <-done:
				return
			}
		}
	}()
	for {
		select {
		case m := <-msgs:
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		case <-restart:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watch checks every LeaseTTL/6 whether the node hears its stream
// (unheard.go) until ctx ends; it asks for a restart of the consumer
// when it is silent with the stream ahead, and when the NATS connection
// reconnected.
func (n *Node) watch(ctx context.Context, restart chan<- struct{}) {
	every := n.cfg.LeaseTTL / 6
	tick := time.NewTicker(every)
	defer tick.Stop()
	ask := func() {
		select {
		case restart <- struct{}{}:
		default:
		}
	}
	h := hearing{applied: n.applied.Load()}
	var cons *jetstream.Consumer
	// A new consumer is judged a whole check after it came (not killed
	// before its first delivery), and after each restart that did not
	// help twice as many (up to 8: consumers made just after a stream's
	// election may take seconds to deliver), until it is heard.
	grace, skip := 1, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.reconnected:
			n.log.Info("NATS reconnected: restarting the consumer", "applied", n.applied.Load())
			ask()
			continue
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, every)
		info, err := n.stream.Info(c)
		cancel()
		var last uint64
		if err == nil {
			n.streamInfo(info)
			last = info.State.LastSeq
			if info.Cluster != nil && info.Cluster.Leader == "" {
				err = errNoLeader
			}
		} else if ctx.Err() != nil {
			return
		}
		if c := n.consumer.Load(); c != cons {
			cons, h.prev = c, 0
		}
		if skip > 0 {
			skip--
			h.prev = 0
		}
		v, why, silent := h.check(last, err, n.applied.Load())
		switch v {
		case deaf:
			n.setUnheard(true, why)
		case heard:
			grace = 1
			if n.nc.IsConnected() {
				n.setUnheard(false, "")
			}
		}
		if silent {
			n.log.Warn("the stream is ahead and nothing comes: restarting the consumer", "applied", n.applied.Load(), "stream_seq", last)
			ask()
			skip, grace = grace-1, min(2*grace, 8)
		}
	}
}

// apply feeds one stream message to Served and, while following on a
// bridge node, to Primary.
func (n *Node) apply(m stored, primary bool) error {
	if m.seq <= n.applied.Load() {
		return nil // redelivered after a consumer reset
	}
	kind, g, l, err := decodeControl(m.data)
	switch {
	case err != nil:
		return fmt.Errorf("bus: stream message %d: %w", m.seq, err)
	case kind != kindGenesis && m.seq != n.applied.Load()+1:
		// A stream's seqs are contiguous but where a rollover purged
		// the old generation, and what follows a purge is the new
		// genesis: any other message after a hole would build a state
		// on ops missing under it.
		return fmt.Errorf("%w: message %d follows %d", ErrGap, m.seq, n.applied.Load())
	case kind == kindGenesis:
		n.applyGenesis(m.seq, g, primary)
	case kind == kindLead:
		if l.Fingerprint != n.cfg.Fingerprint {
			return fmt.Errorf("bus: stream message %d: node %s leads with another engine configuration (%s, this node %s): --trunks, --queue-numbers and the users' names and cellphones must be the same on every node", m.seq, l.Node, l.Fingerprint, n.cfg.Fingerprint)
		}
		n.log.Info("pbx led by", "node", l.Node, "seq", m.seq)
	case kind == kindStall:
		if err := n.applyStall(m.seq, m.data, primary); err != nil {
			return fmt.Errorf("bus: stream message %d: %w", m.seq, err)
		}
	case kind == kindOps:
		if err := n.cfg.Served.Replay(m.data); err != nil {
			return fmt.Errorf("bus: stream message %d: %w", m.seq, err)
		}
		if primary && n.cfg.Primary != nil {
			if err := n.cfg.Primary.Replay(m.data); err != nil {
				return fmt.Errorf("bus: stream message %d: %w", m.seq, err)
			}
		}
	}
	n.applied.Store(m.seq)
	n.m.applied.Add(1)
	n.m.appliedBytes.Add(uint64(len(m.data)))
	n.ready.Store(true)
	n.caughtUp(m.seq)
	return nil
}

// lead takes the PBX link: Primary is at the stream's seq last.
func (n *Node) lead(ctx context.Context, wg *sync.WaitGroup, last uint64) error {
	n.pubSeq, n.pubTerm = last, last
	n.pubMu.Lock()
	n.downSince = time.Now() // no link yet
	n.pubMu.Unlock()
	n.m.takeovers.Add(1)
	p := n.cfg.Primary
	// The lead record goes first and is fenced like every publish: a
	// stream that moved since the catch-up (but for stall markers) means
	// another leader.
	if err := n.publish(lead{Node: n.cfg.Node, Fingerprint: n.cfg.Fingerprint}.encode()); err != nil {
		n.depose(err)
		return nil
	}
	p.Record(n.flush, n.depose, nil)
	n.boundMessages(p)
	if n.cfg.LinkPBX != nil {
		p.onRoll = n.publishGenesis
	}
	// Until the new link has resynchronised, what the old leader last said
	// is not known to be true (one that handed over said so: resyncing).
	if !n.lease.handedIn {
		p.SetLink(calls.LinkDown)
		p.Publish()
	}
	n.leading.Store(true)
	if err := n.serveActions(); err != nil {
		return err
	}
	if err := n.serveHandover(); err != nil {
		return err
	}
	n.log.Info("leading: starting the PBX link", "stream_seq", n.pubSeq)
	wg.Go(func() { n.restoring(ctx) })
	wg.Go(func() { n.beating(ctx) })
	wg.Go(func() { n.rolling(ctx) })
	wg.Go(func() { n.yielding(ctx) })
	wg.Go(func() {
		if err := n.cfg.Lead(ctx); err != nil && ctx.Err() == nil {
			n.depose(fmt.Errorf("link stopped: %w", err))
		}
	})
	return nil
}

// publish stores one message, fenced: it expects the stream's last seq
// to be this leader's last. A failed publish (no ack: NATS out of reach,
// a JetStream election) is retried with the same message id, so one that
// was stored after all is answered by JetStream's duplicate window; a
// wrong last seq means another node leads, unless only stall markers
// came after this leader's last (skipStalls). It gives up only when Run
// ends. pubMu held once leading.
func (n *Node) publish(data []byte) error {
	if n.handedOff {
		return ErrHandedOver
	}
	n.pubCount++
	id := n.cfg.Node + "/" + strconv.FormatUint(n.pubTerm, 10) + "/" + strconv.FormatUint(n.pubCount, 10)
	warned := false
	for {
		// Run's end (a step-down) cuts a try short: the link stops at once.
		ctx, cancel := context.WithTimeout(n.ctx, time.Second)
		ack, err := n.js.Publish(ctx, n.subject, data, jetstream.WithExpectLastSequence(n.pubSeq), jetstream.WithMsgID(id))
		cancel()
		switch {
		case err == nil:
			n.pubSeq = ack.Sequence
			n.m.published.Add(1)
			n.m.publishedBytes.Add(uint64(len(data)))
			return nil
		case isWrongSeq(err) && n.skipStalls():
			continue
		case isWrongSeq(err):
			return fmt.Errorf("publish fenced off (stream moved past seq %d): %w", n.pubSeq, err)
		case errors.Is(err, nats.ErrMaxPayload):
			return fmt.Errorf("publish: a message of %d bytes (one op larger than the NATS max_payload): %w", len(data), err)
		case n.ctx.Err() != nil:
			return fmt.Errorf("publish: %w", err)
		case !warned:
			warned = true
			n.log.Warn("publish failed, retrying", "err", err)
		}
		n.m.retries.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
}

// depose tells Run to step down (the first reason is kept).
func (n *Node) depose(err error) {
	select {
	case n.deposed <- err:
	default:
	}
}

// streamInfo keeps what /metrics shows of the stream.
func (n *Node) streamInfo(info *jetstream.StreamInfo) {
	n.m.streamLast.Store(info.State.LastSeq)
	n.m.streamMsgs.Store(info.State.Msgs)
	n.m.streamBytes.Store(info.State.Bytes)
}

// boundMessages fits the primary's messages to the servers' max_payload:
// its chunks are a quarter of it at most, an op that does not fit after
// the batch so far starts a message, and one larger than a message is
// dropped with an error (Replica.fit), so that no publish is refused
// for its size (the leader would step down, and the next one too).
func (n *Node) boundMessages(p *Replica) {
	mp := int(n.nc.MaxPayload())
	if mp <= 0 {
		return
	}
	p.maxMsg = max(mp-4096, mp/2) // room for the lookups recorded after an op
	p.chunk = min(DefaultChunk, p.maxMsg/4)
	p.onDrop = func(op byte, size int) {
		n.m.dropped.Add(1)
		n.log.Error("an op larger than the NATS max_payload was dropped: the state may miss it until the next reconcile or resync", "op", op, "bytes", size, "max_payload", mp)
	}
}
