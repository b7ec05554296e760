package history

// hotGroup is up to one batch of CDRs the writer has just synced, kept in
// memory so that the drainer, when it has caught up with the writer (the
// usual case), writes them without reading them back from the file and
// decoding them: the JSON decoding was a third of the recorder's CPU.
// start and end are their bytes in segment seg.
type hotGroup struct {
	seg        uint64
	start, end int64
	cdrs       []CDR
}

// maxHot bounds the CDRs kept in memory; past it the oldest are
// forgotten, and the drainer reads them from the file (the database is
// down or slow).
const maxHot = 4096

// keepHot records groups just written at offset base of the segment
// being written (their start and end are relative to base). Called with
// s.mu held.
func (s *spool) keepHot(base int64, groups []hotGroup) {
	for _, g := range groups {
		g.seg, g.start, g.end = s.wseg, base+g.start, base+g.end
		s.hot = append(s.hot, g)
		s.hotN += len(g.cdrs)
	}
	for s.hotN > maxHot {
		s.hotN -= len(s.hot[0].cdrs)
		s.hot[0] = hotGroup{}
		s.hot = s.hot[1:]
	}
}

// takeHot returns the group that starts at the drain position when it
// is still in memory, and forgets the groups behind the position (read
// from the file meanwhile, in whole or in part).
func (s *spool) takeHot() (hotGroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.hot) > 0 {
		g := s.hot[0]
		if g.seg > s.rseg || (g.seg == s.rseg && g.start > s.roff) {
			return hotGroup{}, false // ahead of the position: the file first
		}
		s.hot[0] = hotGroup{}
		s.hot = s.hot[1:]
		s.hotN -= len(g.cdrs)
		if g.seg == s.rseg && g.start == s.roff {
			return g, true
		}
	}
	return hotGroup{}, false
}
