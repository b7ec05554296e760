package wal

// Group is up to one batch of records the writer has just synced, kept
// in memory so that the drainer, when it has caught up with the writer
// (the usual case), hands them on without reading them back from the
// file and decoding them: the JSON decoding was a third of the CDR
// recorder's CPU. Start and End are their bytes in the buffer given to
// Append.
type Group[T any] struct {
	Start, End int64
	Items      []T
}

// hotGroup is a Group placed in its segment.
type hotGroup[T any] struct {
	seg        uint64
	start, end int64
	items      []T
}

// maxHot bounds the records kept in memory; past it the oldest are
// forgotten, and the drainer reads them from the file (the database is
// down or slow).
const maxHot = 4096

// keepHot records groups just written at offset base of the segment
// being written (their start and end are relative to base). Called with
// s.mu held.
func (s *Log[T]) keepHot(base int64, groups []Group[T]) {
	for _, g := range groups {
		s.hot = append(s.hot, hotGroup[T]{seg: s.wseg, start: base + g.Start, end: base + g.End, items: g.Items})
		s.hotN += len(g.Items)
	}
	for s.hotN > maxHot {
		s.hotN -= len(s.hot[0].items)
		s.hot[0] = hotGroup[T]{}
		s.hot = s.hot[1:]
	}
}

// takeHot returns the group that starts at the drain position when it
// is still in memory, and forgets the groups behind the position (read
// from the file meanwhile, in whole or in part).
func (s *Log[T]) takeHot() (hotGroup[T], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.hot) > 0 {
		g := s.hot[0]
		if g.seg > s.rseg || (g.seg == s.rseg && g.start > s.roff) {
			return hotGroup[T]{}, false // ahead of the position: the file first
		}
		s.hot[0] = hotGroup[T]{}
		s.hot = s.hot[1:]
		s.hotN -= len(g.items)
		if g.seg == s.rseg && g.start == s.roff {
			return g, true
		}
	}
	return hotGroup[T]{}, false
}
