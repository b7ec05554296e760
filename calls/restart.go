package calls

// Restart puts the engine back to the state New built, as if New had been
// called again with the same Config, but keeps its Feed and its readers:
// the feed is emptied and goes on after seq, and the snapshot published
// is the new state's at seq. A reader behind seq finds the changes it
// lacks gone (Feed.Since is not ok) and starts from the snapshot, as
// after falling behind the feed; seq must be past every seq the feed has
// given out so that no seq names two states. Package bus restarts every
// node's engine at a generation of its op log (docs/scale-out.md).
// Engine goroutine only.
func (e *Engine) Restart(seq uint64) {
	e.init(e.cfg)
	e.snap.Store(e.pub.snapshot(e, seq, e.linkSince))
	e.feed.restart(seq)
}

// restart empties the feed and makes seq its last, waking its readers.
func (f *Feed) restart(seq uint64) {
	f.mu.Lock()
	clear(f.buf)
	f.head, f.n, f.last = 0, 0, seq
	wake := f.wake
	f.wake = make(chan struct{})
	f.mu.Unlock()
	close(wake)
}

// Adopt takes the state of o, an engine built from the same Config and
// fed since its own New or Restart, as if this engine had been fed what o
// was: its snapshot becomes this engine's and the feed goes on after o's
// last seq, emptied (readers start from the snapshot, as after Restart).
// This engine keeps its own clock and lookups (its Config's). o must not
// be used afterwards. Package bus builds a new generation of the op log
// on a second engine while clients keep the old state, then adopts it.
// Engine goroutine only (this engine's and o's).
func (e *Engine) Adopt(o *Engine) {
	cfg, now, log := e.cfg, e.now, e.log
	e.engineState = o.engineState
	e.cfg, e.now, e.log = cfg, now, log
	e.snap.Store(o.snap.Load())
	e.feed.restart(o.feed.LastSeq())
}
