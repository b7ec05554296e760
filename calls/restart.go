package calls

// Restart puts the engine back to the state New built, as if New had been
// called again with the same Config, but keeps its Feed and its readers:
// the feed is emptied and goes on after seq, and the snapshot published
// is the new state's at seq. A reader behind seq finds the changes it
// lacks gone (Feed.Since is not ok) and starts from the snapshot, as
// after falling behind the feed, or replays Feed.Generation; seq must be
// past every seq the feed has given out so that no seq names two states.
// Package bus restarts every node's engine at a generation of its op log
// (docs/scale-out.md). Engine goroutine only.
func (e *Engine) Restart(seq uint64) {
	e.init(e.cfg)
	e.snap.Store(e.pub.snapshot(e, seq, e.linkSince))
	e.feed.restart(seq)
}

// restart empties the feed and makes seq its last and its generation's
// base, waking its readers.
func (f *Feed) restart(seq uint64) {
	f.mu.Lock()
	clear(f.buf)
	f.head, f.n, f.last, f.base = 0, 0, seq, seq
	f.prev = run{}
	wake := f.wake
	f.wake = make(chan struct{})
	f.mu.Unlock()
	close(wake)
}

// Adopt takes the state of o, an engine built from the same Config and
// fed since its own New or Restart, as if this engine had been fed what o
// was: its snapshot becomes this engine's, and so does its feed, the
// changes o published since its New or Restart (those the buffer holds),
// under this engine's Feed. A reader of this engine from before finds
// its changes gone (Feed.Since is not ok) and starts from the snapshot,
// or replays the adopted changes (Feed.Generation), after what it had
// not read of its own (Feed.Previous). This engine keeps
// its own clock and lookups (its Config's). o must not be used
// afterwards. Package bus builds a new generation of the op log on a
// second engine while clients keep the old state, then adopts it.
// Engine goroutine only (this engine's and o's).
func (e *Engine) Adopt(o *Engine) {
	cfg, now, log := e.cfg, e.now, e.log
	e.engineState = o.engineState
	e.cfg, e.now, e.log = cfg, now, log
	e.snap.Store(o.snap.Load())
	e.feed.adopt(o.feed)
}

// adopt takes o's changes and seqs, waking f's readers; f's own run is
// kept as the previous one (Previous). o must not be used afterwards:
// its buffer is f's now (an append to o panics).
func (f *Feed) adopt(o *Feed) {
	o.mu.Lock()
	r, base := o.run, o.base
	o.run = run{last: r.last}
	o.mu.Unlock()
	f.mu.Lock()
	f.prev, f.run, f.base = f.run, r, base
	wake := f.wake
	f.wake = make(chan struct{})
	f.mu.Unlock()
	close(wake)
}

// Generation returns the seq this feed's current run began after (0 for
// New's; the last Restart's seq, or that of the engine Adopt took over)
// and the changes since, which took the engine from a new one's state at
// base to its snapshot: what a reader from before base replays instead
// of a jump to the snapshot (package webhook, so that no call of a
// rollover's resync window goes unseen). ok is false when some fell out
// of the buffer.
func (f *Feed) Generation() (base uint64, changes []Change, ok bool) {
	f.mu.RLock()
	base = f.base
	f.mu.RUnlock()
	changes, ok = f.Since(base)
	return base, changes, ok
}

// Previous returns the changes after seq of the run before the current
// one, those the buffer held when Adopt replaced it: what a reader that
// was behind at the adoption had not read of the old generation, to
// apply before replaying Generation (package webhook: a call whose whole
// life was in that tail is seen). ok is false when seq is not in that
// run (a Restart since, two adoptions, or seq of another run) or some of
// its changes after seq fell out of the buffer.
func (f *Feed) Previous(seq uint64) (changes []Change, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.prev.buf == nil {
		return nil, false
	}
	return f.prev.since(seq)
}
