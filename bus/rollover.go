package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// Generations (docs/scale-out.md, "Generations and the size of the log").
// The op log would grow without bound and a new node would replay it from
// the stream's first message. So when the current generation passes
// Config.RollBytes or RollAge, the leader starts a new one: its link's
// AMI client hands the link a LinkDown and a LinkUp marker of its own
// (LinkPBX.Next, the AMI connection staying up), the primary replica's next
// op publishes a genesis (fenced like every publish) and restarts the
// engine fresh (calls.Engine.Restart), and the link's normal resync
// rebuilds the state from the PBX's lists, recorded after the genesis.
// Every node starts the new generation at the genesis (the replica its
// clients read builds it aside, Replica.generation), so the log before it
// is needed by nobody: the leader purges it (JetStream purge up to the
// genesis's seq) and a node that starts reads the stream from its first
// message, the current generation's genesis.
//
// The epoch stays the stream's (every genesis carries the first one's
// id), and the restarted feed goes on past every seq given out before
// (Base: the leader's feed seq plus baseGap), so that no seq names two
// states: a WebSocket client resuming from before the rollover finds its
// changes gone and is sent a full snapshot, as one that fell behind the
// feed; the hub resends its clients snapshots when the feed jumps.

// Defaults of Config's rollover settings.
const (
	DefaultRollBytes = 256 << 20
	DefaultRollAge   = 24 * time.Hour
	DefaultRollCheck = 10 * time.Second
)

// rollReady is how long a node building a new generation stays ready
// though its state is stale (every node is, for the rollover's resync):
// past it the state is stale for another reason (the PBX down), and the
// node says so. The link's resync timeout.
const rollReady = 30 * time.Second

// building reports whether the replica builds a generation, for less than
// rollReady. Any goroutine.
func (r *Replica) building() bool {
	at := r.shadowing.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < rollReady
}

// baseGap is how far past the leader's feed seq a generation's feeds
// start: the served replicas may be ahead of the leader's primary by the
// stall markers' changes (two at most per marker, a marker at most every
// LeaseTTL/2), never by this much.
const baseGap = 1 << 20

// LinkPBX wraps the AMI client that the leader's link reads, so that a
// rollover can resync the link without a new AMI connection: Next hands
// out a LinkDown and a LinkUp marker when the node asks for a new
// generation. Give it to link.New instead of the client, and to
// Config.LinkPBX; without it the node never rolls over.
type LinkPBX struct {
	inner link.PBX
	roll  chan struct{} // a rollover asked
	arm   atomic.Pointer[func()]

	// Next's goroutine only.
	parent context.Context
	cur    context.Context // parent's child, cancelled by a rollover
	cancel context.CancelFunc
}

// NewLinkPBX wraps inner (an *ami.Client).
func NewLinkPBX(inner link.PBX) *LinkPBX {
	return &LinkPBX{inner: inner, roll: make(chan struct{}, 1)}
}

// Do is the client's.
func (p *LinkPBX) Do(ctx context.Context, a ami.Message) (ami.Response, error) {
	return p.inner.Do(ctx, a)
}

// Next is the client's, but that a rollover asked while it waits (or
// before) makes it return a LinkDown and a LinkUp marker: no event is
// lost (the client's Next leaves them queued when its context ends).
func (p *LinkPBX) Next(ctx context.Context) ([]ami.Event, error) {
	if p.parent != ctx {
		if p.cancel != nil {
			p.cancel()
		}
		p.parent, p.cur, p.cancel = ctx, nil, nil
	}
	if p.cur == nil {
		cur, cancel := context.WithCancel(ctx)
		p.cur, p.cancel = cur, cancel
		go func() {
			select {
			case <-p.roll:
				cancel()
			case <-cur.Done():
			}
		}()
	}
	evs, err := p.inner.Next(p.cur)
	if err == nil || ctx.Err() != nil || p.cur.Err() == nil {
		return evs, err
	}
	p.cur = nil // the rollover's: the next call waits for the next one
	if arm := p.arm.Load(); arm != nil {
		(*arm)()
	}
	return []ami.Event{{Link: ami.LinkDown}, {Link: ami.LinkUp}}, nil
}

// ask asks Next for a rollover (at most one pending).
func (p *LinkPBX) ask() {
	select {
	case p.roll <- struct{}{}:
	default:
	}
}

// generation is what a node knows of the current generation (Run's
// goroutine and the leader's link write it, anyone reads it).
type generation struct {
	mu    sync.Mutex
	g     genesis
	seq   uint64        // the genesis's stream seq
	rolls atomic.Uint64 // rollovers this node led
	mine  atomic.Uint64 // the last generation this node started
}

func (gs *generation) get() (genesis, uint64) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.g, gs.seq
}

func (gs *generation) set(g genesis, seq uint64) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if seq > gs.seq {
		gs.g, gs.seq = g, seq
	}
}

// restart starts the replica's engine again at g, at g's time. Engine
// goroutine only.
func (r *Replica) restart(g genesis) {
	r.now = time.UnixMilli(g.Created)
	r.eng.Restart(g.Base)
	clear(r.names)
	clear(r.rings)
	r.items, r.answer = nil, nil
}

// rollover starts a new generation while recording: the batch so far
// goes out as a chunk of the old one, onRoll publishes the genesis, and
// the engine restarts. It returns false when the replica stopped.
func (r *Replica) rollover() bool {
	r.roll.Store(false)
	if len(r.buf) > 0 && !r.send(false) {
		return false
	}
	g, err := r.onRoll()
	if err != nil {
		r.err = err
		if r.onError != nil {
			r.onError(err)
		}
		return false
	}
	r.restart(g)
	return true
}

// generation applies a genesis to a replica clients read. The first
// generation's restarts a new engine (nothing changes). A later one must
// not show clients the restarted engine, empty until the rollover's
// resync has listed the PBX (a webhook would see every call hang up): the
// engine clients read goes resyncing, stale, with the calls it has, and
// the new generation is built on a shadow replica until its state is
// live; then the engine adopts it (calls.Engine.Adopt), at the same
// message on every node, and its feed jumps past the shadow's last seq,
// so clients are sent the new snapshot.
func (r *Replica) generation(g genesis) {
	if g.Base == 0 {
		r.restart(g)
		return
	}
	if r.shadow != nil {
		// The generation being built never went live here (a stall
		// marker after its resync, and the leader, live, rolled over
		// again): adopt it as it is, so that its changes reach the
		// feed's readers (package webhook replays them) rather than
		// being dropped with it.
		r.adopt()
	}
	r.shadowing.Store(time.Now().UnixNano()) // before the state goes stale: Node.Ready
	r.now = time.UnixMilli(g.Created)
	r.eng.SetLink(calls.LinkResyncing)
	r.eng.Publish()
	r.shadow = NewReplica(r.cfg)
	r.shadow.restart(g)
}

// replayShadow replays one message on the shadow, and adopts it once its
// state is live.
func (r *Replica) replayShadow(data []byte) error {
	s := r.shadow
	if err := s.Replay(data); err != nil {
		return err
	}
	if s.eng.Snapshot().Link != calls.LinkLive {
		return nil
	}
	r.adopt()
	return nil
}

// adopt makes the shadow's state and feed the engine's.
func (r *Replica) adopt() {
	s := r.shadow
	r.eng.Adopt(s.eng)
	r.now, r.items, r.answer = s.now, s.items, s.answer
	r.shadow = nil
	r.shadowing.Store(0)
}

// applyGenesis starts a generation on Served (and restarts Primary while
// following) at a genesis stored at seq.
func (n *Node) applyGenesis(seq uint64, g genesis, primary bool) {
	if last := n.cfg.Served.Engine().Feed().LastSeq(); g.Base != 0 && last >= g.Base {
		n.log.Error("generation starts at a feed seq this node passed: seqs name two states until clients resubscribe", "base", g.Base, "feed_seq", last)
	}
	n.cfg.Served.generation(g)
	if primary && n.cfg.Primary != nil {
		n.cfg.Primary.restart(g)
	}
	n.gen.set(g, seq)
	if g.Gen > 1 {
		n.log.Info("new generation of the op log: engines restarted", "gen", g.Gen, "seq", seq, "base", g.Base)
	}
}

// publishGenesis is the primary replica's onRoll: it publishes the next
// generation's genesis, fenced, from the link's goroutine, and has the
// old generation purged.
func (n *Node) publishGenesis() (genesis, error) {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	cur, _ := n.gen.get()
	base := max(n.cfg.Served.Engine().Feed().LastSeq(), n.cfg.Primary.Engine().Feed().LastSeq()) + baseGap
	g := genesis{ID: n.epoch, Created: time.Now().UnixMilli(), Gen: cur.Gen + 1, Base: base}
	if err := n.publish(g.encode()); err != nil {
		return g, err
	}
	seq := n.pubSeq
	n.gen.set(g, seq)
	n.gen.rolls.Add(1)
	n.gen.mine.Store(g.Gen)
	// The engine restarts down: a restore after a marker waits for the
	// next batch's end, whose link state is the new generation's.
	n.midLink = true
	n.log.Info("rolled the op log over: new generation", "gen", g.Gen, "seq", seq, "base", base)
	n.bg.Go(func() { n.purge(n.ctx, seq) })
	return g, nil
}

// purge drops the stream's messages before seq, the current generation's
// genesis: every node restarts there, and a node that starts reads from
// the stream's first message. Messages from seq on are never touched,
// so a deposed leader's purge is harmless.
func (n *Node) purge(ctx context.Context, seq uint64) {
	_, err := retried(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, n.stream.Purge(ctx, jetstream.WithPurgeSequence(seq))
	})
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("the old generation of the op log was not purged: the next rollover check tries again", "before_seq", seq, "err", err)
		}
		return
	}
	n.log.Info("old generation of the op log purged", "before_seq", seq)
}

// rolling runs while this node leads: every RollCheck it purges what an
// earlier purge left and asks for a rollover once the current generation
// passed RollBytes or RollAge, while the link is live (a rollover's
// resync needs the PBX).
func (n *Node) rolling(ctx context.Context) {
	if n.cfg.LinkPBX == nil || (n.cfg.RollBytes < 0 && n.cfg.RollAge < 0) {
		return
	}
	tick := time.NewTicker(n.cfg.RollCheck)
	defer tick.Stop()
	var askedGen uint64 // the generation a rollover was asked of, and when
	var askedAt time.Time
	// A generation this node started, seen live, and the stream's bytes
	// then: what its resync wrote (unknown, 0, for one it took over).
	var liveGen, floor uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := n.stream.Info(c)
		cancel()
		if err != nil {
			continue
		}
		n.streamInfo(info)
		g, seq := n.gen.get()
		if info.State.FirstSeq < seq {
			n.purge(ctx, seq)
			continue
		}
		isLive := n.cfg.Primary.Engine().Snapshot().Link == calls.LinkLive
		if isLive && g.Gen != liveGen {
			liveGen, floor = g.Gen, 0
			if g.Gen == n.gen.mine.Load() {
				floor = info.State.Bytes
			}
		}
		// Past RollBytes, and past twice what the generation's resync
		// wrote: a limit below one resync must not roll over for ever.
		big := n.cfg.RollBytes >= 0 && info.State.Bytes >= max(uint64(n.cfg.RollBytes), 2*floor)
		old := n.cfg.RollAge >= 0 && time.Since(time.UnixMilli(g.Created)) >= n.cfg.RollAge
		if (big || old) && isLive && g.Gen == liveGen && (g.Gen != askedGen || time.Since(askedAt) > time.Minute) {
			askedGen, askedAt = g.Gen, time.Now()
			n.log.Info("op log generation full: rolling over", "gen", g.Gen, "bytes", info.State.Bytes, "msgs", info.State.Msgs, "age", time.Since(time.UnixMilli(g.Created)).Round(time.Second))
			n.cfg.LinkPBX.ask()
		}
	}
}

// armRollover makes the primary replica start a generation at its next
// op (LinkPBX.Next calls it as it hands out the markers).
func (n *Node) armRollover() {
	n.cfg.Primary.roll.Store(true)
}

// checkRollConfig fills in the rollover defaults.
func checkRollConfig(cfg *Config) error {
	if cfg.LinkPBX != nil && cfg.Primary == nil {
		return errors.New("bus: LinkPBX is a bridge node's (with Primary)")
	}
	if cfg.RollBytes == 0 {
		cfg.RollBytes = DefaultRollBytes
	}
	if cfg.RollAge == 0 {
		cfg.RollAge = DefaultRollAge
	}
	if cfg.RollCheck <= 0 {
		cfg.RollCheck = DefaultRollCheck
		if cfg.RollAge > 0 {
			cfg.RollCheck = max(min(cfg.RollCheck, cfg.RollAge/10), 100*time.Millisecond)
		}
	}
	if cfg.RollBytes > 0 && cfg.RollBytes < 64<<10 {
		return fmt.Errorf("bus: RollBytes %d: at least 64 KiB (a resync alone can be larger)", cfg.RollBytes)
	}
	return nil
}
