package synthpbx

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Mix is the traffic a Gen places: shares of the new calls (each 0 to
// 1, their sum at most 1; the rest are internal calls), how long each
// call lasts and how long its callee rings.
type Mix struct {
	Queue    float64 // outside callers into a queue
	Trunk    float64 // trunk calls, half inbound to an extension, half outbound
	Transfer float64 // internal calls transferred, half blind (Redirect), half attended (Atxfer)
	Forward  float64 // outside callers to an extension forwarded to an outside number: trunk in, trunk out
	Hold     time.Duration
	Ring     time.Duration
}

// Check says what is wrong with m, or nil.
func (m Mix) Check() error {
	for _, s := range []float64{m.Queue, m.Trunk, m.Transfer, m.Forward} {
		if s < 0 || s > 1 {
			return fmt.Errorf("synthpbx: a share of %g, want 0 to 1", s)
		}
	}
	if sum := m.Queue + m.Trunk + m.Transfer + m.Forward; sum > 1+1e-9 {
		return fmt.Errorf("synthpbx: queue, trunk, transfer and forward shares add up to %g, more than 1", sum)
	}
	if m.Ring <= 0 || m.Hold <= m.Ring {
		return fmt.Errorf("synthpbx: calls lasting %v, not longer than the ring time %v", m.Hold, m.Ring)
	}
	return nil
}

// Gen places and ends a Mix of calls on a PBX: a FIFO of idle
// extensions that are no queue's members (each queue's idle members in
// a FIFO of their own), and each call's next steps in time order. A
// plain call rings Ring, then talks until Hold after its start; a
// transferred one is transferred a quarter of its talk in, its target
// answers after another quarter, and an attended transfer completes
// after a third. A call that finds too few idle extensions (or a queue
// call no idle member) is not placed (Skipped); a transfer that finds no
// target is not made. Trunk calls go in and out in turn, transfers are
// blind and attended in turn. A forward holds its extension (never rung)
// while it is up, so no other call uses it. Gen is not safe for
// concurrent use.
type Gen struct {
	P   *PBX
	mix Mix
	rnd *rand.Rand

	free    []int
	members [][]int // by queue
	steps   steps
	calls   map[*Call]struct{}
	nextQ   int
	outside int
	turn    [2]int // trunk calls, transfers: how many drawn, for in/out and blind/attended in turn

	// Before, when set, is called for a call about to be placed (its
	// Kind and parties set, nothing emitted yet); Answered when its
	// callee answers (a blind transfer's target too), Ended when it is
	// hung up.
	Before, Answered, Ended func(*Call)

	Placed  [len(kindNames)]int // calls placed, by Kind
	Skipped int
	MaxUp   int
}

// NewGen makes a Gen of mix on p, its choices drawn from seed.
func NewGen(p *PBX, mix Mix, seed uint64) (*Gen, error) {
	if err := mix.Check(); err != nil {
		return nil, err
	}
	if mix.Queue > 0 && len(p.queues) == 0 {
		return nil, errors.New("synthpbx: a queue share without queues")
	}
	g := &Gen{P: p, mix: mix, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), calls: map[*Call]struct{}{}}
	for i := range p.exts {
		if p.queueOf(i) == nil {
			g.free = append(g.free, i)
		}
	}
	for _, q := range p.queues {
		g.members = append(g.members, append([]int(nil), q.Members...))
	}
	return g, nil
}

// Up is how many calls are up (ringing or talking).
func (g *Gen) Up() int { return len(g.calls) }

type stepKind uint8

const (
	stepAnswer stepKind = iota
	stepTransfer
	stepComplete
	stepHangup
)

type step struct {
	at   time.Time
	seq  uint64
	kind stepKind
	c    *Call
}

type steps struct {
	s   []step
	seq uint64
}

func (s *steps) Len() int { return len(s.s) }
func (s *steps) Less(i, j int) bool {
	if !s.s[i].at.Equal(s.s[j].at) {
		return s.s[i].at.Before(s.s[j].at)
	}
	return s.s[i].seq < s.s[j].seq
}
func (s *steps) Swap(i, j int) { s.s[i], s.s[j] = s.s[j], s.s[i] }
func (s *steps) Push(x any)    { s.s = append(s.s, x.(step)) }
func (s *steps) Pop() any {
	x := s.s[len(s.s)-1]
	s.s = s.s[:len(s.s)-1]
	return x
}

func (g *Gen) at(t time.Time, k stepKind, c *Call) {
	g.steps.seq++
	heap.Push(&g.steps, step{at: t, seq: g.steps.seq, kind: k, c: c})
}

// Next is when the next step is due; zero when none is.
func (g *Gen) Next() time.Time {
	if len(g.steps.s) == 0 {
		return time.Time{}
	}
	return g.steps.s[0].at
}

func (g *Gen) kind() Kind {
	r := g.rnd.Float64()
	switch {
	case r < g.mix.Queue:
		return QueueCall
	case r < g.mix.Queue+g.mix.Trunk:
		return TrunkIn + g.alternate(0)
	case r < g.mix.Queue+g.mix.Trunk+g.mix.Transfer:
		return Blind + g.alternate(1)
	case r < g.mix.Queue+g.mix.Trunk+g.mix.Transfer+g.mix.Forward:
		return Forward
	}
	return Internal
}

// alternate is 0 and 1 in turn for the pair i: the trunk's calls go in
// and out, the transfers are blind and attended, in equal numbers (drawn
// at random, a short run could make eight trunk calls all outbound).
func (g *Gen) alternate(i int) Kind {
	g.turn[i]++
	return Kind(g.turn[i] & 1)
}

func (g *Gen) take() int {
	i := g.free[0]
	g.free = g.free[1:]
	return i
}

func (g *Gen) number() string {
	g.outside++
	return "06" + strconv.Itoa(10000000+g.outside%90000000)
}

// Start places one new call of the mix at now (answered plain calls
// only when plain: the fill, whose calls answer at once and end at
// hangup) and schedules its steps; it returns nil when the call found
// too few idle extensions.
func (g *Gen) Start(now time.Time) *Call {
	return g.start(now, g.kind(), false, time.Time{})
}

// Fill places one call of the mix, a transfer made plain, answers it at
// once and ends it at hangup.
func (g *Gen) Fill(now, hangup time.Time) *Call {
	k := g.kind()
	if k == Blind || k == Attended {
		k = Internal
	}
	return g.start(now, k, true, hangup)
}

func (g *Gen) start(now time.Time, k Kind, fill bool, hangup time.Time) *Call {
	c := &Call{Kind: k, A: -1, B: -1, C: -1, Tag: -1}
	var ring []int
	switch k {
	case QueueCall:
		qi := g.nextQ % len(g.members)
		g.nextQ++
		idle := g.members[qi]
		if len(idle) == 0 {
			g.Skipped++
			return nil
		}
		n := min(2, len(idle)) // ringall: the two longest idle ring
		ring = append(ring, idle[:n]...)
		g.members[qi] = idle[n:]
		c.Queue, c.Outside = g.P.queues[qi], g.number()
	case TrunkIn, TrunkOut, Forward:
		if len(g.free) < 1 {
			g.Skipped++
			return nil
		}
		c.Outside = g.number()
		switch k {
		case TrunkIn:
			c.B = g.take()
		case TrunkOut:
			c.A = g.take()
		default:
			c.Fwd, c.FwdTo = g.take(), g.number()
		}
	default:
		if len(g.free) < 2 {
			g.Skipped++
			return nil
		}
		c.A, c.B = g.take(), g.take()
	}
	if g.Before != nil {
		g.Before(c)
	}
	var placed *Call
	switch k {
	case QueueCall:
		placed = g.P.QueueCall(c.Outside, c.Queue, ring)
	case TrunkIn:
		placed = g.P.DialIn(c.Outside, c.B)
	case TrunkOut:
		placed = g.P.DialOut(c.A, c.Outside)
	case Forward:
		placed = g.P.DialForward(c.Outside, c.Fwd, c.FwdTo)
	default:
		placed = g.P.Dial(c.A, c.B)
	}
	placed.Kind, placed.Tag = k, c.Tag
	g.Placed[k]++
	g.calls[placed] = struct{}{}
	g.MaxUp = max(g.MaxUp, len(g.calls))
	if fill {
		g.answer(placed)
		g.at(hangup, stepHangup, placed)
		return placed
	}
	ringEnd, end := now.Add(g.mix.Ring), now.Add(g.mix.Hold)
	g.at(ringEnd, stepAnswer, placed)
	if k == Blind || k == Attended {
		u := (end.Sub(ringEnd)) / 4
		g.at(ringEnd.Add(u), stepTransfer, placed)
		g.at(ringEnd.Add(2*u), stepAnswer, placed)
		if k == Attended {
			g.at(ringEnd.Add(3*u), stepComplete, placed)
		}
	}
	g.at(end, stepHangup, placed)
	return placed
}

func (g *Gen) answer(c *Call) {
	was := c.Answered()
	if c.Kind == QueueCall && !was && len(c.agentIdx) > 1 {
		defer func(losers []int) { g.freeExt(losers...) }(append([]int(nil), c.agentIdx[1:]...))
	}
	g.P.Answer(c)
	if !was && c.Answered() && g.Answered != nil {
		g.Answered(c)
	}
}

func (g *Gen) freeExt(exts ...int) {
	for _, i := range exts {
		if q := g.P.queueOf(i); q != nil {
			qi := slices.Index(g.P.queues, q)
			g.members[qi] = append(g.members[qi], i)
		} else {
			g.free = append(g.free, i)
		}
	}
}

// Due runs every step due at now.
func (g *Gen) Due(now time.Time) {
	for len(g.steps.s) > 0 && !g.steps.s[0].at.After(now) {
		s := heap.Pop(&g.steps).(step)
		c := s.c
		if c.state == done {
			continue
		}
		switch s.kind {
		case stepAnswer:
			g.answer(c)
		case stepTransfer:
			if len(g.free) == 0 || c.state != up {
				continue
			}
			to := g.take()
			if c.Kind == Blind {
				b := c.B
				g.P.Redirect(c, to)
				g.freeExt(b)
			} else {
				g.P.Transfer(c, to)
			}
		case stepComplete:
			a := c.A
			if c.state == consulted {
				g.P.Complete(c)
				g.freeExt(a)
			}
		case stepHangup:
			g.hangup(c)
		}
	}
}

func (g *Gen) hangup(c *Call) {
	held := append([]int(nil), c.Held()...)
	g.P.Hangup(c)
	g.freeExt(held...)
	delete(g.calls, c)
	if g.Ended != nil {
		g.Ended(c)
	}
}

// HangupAll ends every call up, in the order they were placed, and
// forgets their steps.
func (g *Gen) HangupAll() {
	var order []*Call
	for c := range g.calls {
		order = append(order, c)
	}
	sortCalls(order)
	for _, c := range order {
		g.hangup(c)
	}
	g.steps.s = nil
}

// sortCalls orders calls by their first channel's creation.
func sortCalls(cs []*Call) {
	slices.SortFunc(cs, func(a, b *Call) int { return a.first() - b.first() })
}

func (c *Call) first() int {
	if len(c.live) == 0 {
		return 0
	}
	return c.live[0].Seq
}
