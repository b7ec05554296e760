package bus

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/link"
)

// Candidate is what a bridge contends for a PBX's lead with, and leads
// it with: a Node whose primary replica the link drives while it leads,
// over an AMI client of its own. Each is built fresh and used once: a
// deposed one's primary engine may hold ops the stream lacks, and an
// AMI client runs once.
type Candidate struct {
	Node   *Node
	Client *ami.Client // the link's; for its figures
	Link   *link.Link
	done   atomic.Bool // Node's Run returned
}

// Contender keeps a bridge's candidate for a PBX's lead at work: one
// deposed (ErrDeposed) is closed and replaced by a fresh one, standing
// by, so that the PBX's lead alone is lost, the replica clients read
// goes on following and the process is untouched (docs/scale-out.md,
// "Deposed"). Set its fields, then Start it once and Run it.
type Contender struct {
	PBX string // on the bus, for the log
	// New builds a fresh candidate, standing by.
	New func(ctx context.Context) (*Candidate, error)
	Log *slog.Logger
	cur atomic.Pointer[Candidate] // the one contending or leading
}

// Start builds the first candidate.
func (c *Contender) Start(ctx context.Context) error {
	cand, err := c.New(ctx)
	if err != nil {
		return err
	}
	c.cur.Store(cand)
	return nil
}

// Current is the candidate contending or leading; nil before Start.
func (c *Contender) Current() *Candidate { return c.cur.Load() }

// Leader is the candidate that leads the PBX, or nil.
func (c *Contender) Leader() *Candidate {
	if cand := c.cur.Load(); cand != nil && !cand.done.Load() && cand.Node.Leading() {
		return cand
	}
	return nil
}

// Close closes the current candidate's node. Call it after Run has
// returned.
func (c *Contender) Close() {
	if cand := c.cur.Load(); cand != nil {
		cand.Node.Close()
	}
}

// Run runs candidates until ctx ends: one deposed is closed and
// replaced by a fresh one (standBy), which follows the stream and
// contends again a second later (two bridges fencing each other off do
// not spin). Another error of a candidate's is returned.
func (c *Contender) Run(ctx context.Context) error {
	for {
		cand := c.cur.Load()
		err := cand.Node.Run(ctx)
		cand.done.Store(true)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, ErrDeposed) {
			return err
		}
		if errors.Is(err, ErrHandedOver) {
			c.Log.Info("handed over: a bridge that prefers this PBX leads it; standing by again with a fresh engine", "pbx", c.PBX)
		} else {
			c.Log.Warn("deposed: this PBX's lead is lost, standing by again with a fresh engine; the state clients read goes on following",
				"pbx", c.PBX, "err", err)
		}
		next := c.standBy(ctx)
		if next == nil {
			return nil // ctx ended
		}
		c.cur.Store(next)
		cand.Node.Close()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// standBy makes the candidate that stands by after a deposal, trying
// again with backoff (1 s, doubling up to 30 s) for as long as ctx lives:
// NATS out of reach then (Open gives up after some 15 s) must not stop
// the process, whose served state goes on following (unheard
// meanwhile). Nil once ctx ended.
func (c *Contender) standBy(ctx context.Context) *Candidate {
	wait := time.Second
	for {
		next, err := c.New(ctx)
		if err == nil {
			return next
		}
		if ctx.Err() != nil {
			return nil
		}
		c.Log.Warn("cannot stand by again after a deposal: trying again", "pbx", c.PBX, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
