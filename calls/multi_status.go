package calls

import "cmp"

// The link status of a combined state: each PBX's link (Snapshot.PBXs),
// the aggregate of all, and the status as a reader of some PBXs sees it
// (a user limited to some, a ?pbx= read): their links only, the
// aggregate of theirs.

// PBXState is one PBX's link as the combined snapshot shows it.
type PBXState struct {
	Name  string // "" for the default PBX
	Link  LinkState
	Stale bool
	Since int64 // ms since the epoch when Link last changed
}

func all(string) bool { return true }

// aggregate is the link of the PBXs sees keeps (by PBXState.Name): the
// worst of theirs, stale when one of them is, since the latest change.
func aggregate(pbxs []PBXState, sees func(string) bool) (link LinkState, stale bool, since int64) {
	link = LinkLive
	for _, st := range pbxs {
		if !sees(st.Name) {
			continue
		}
		if worse(st.Link, link) {
			link = st.Link
		}
		stale = stale || st.Stale
		since = max(since, st.Since)
	}
	return link, stale, since
}

// StatusFor is the status as a reader of some PBXs sees it (a user
// limited to some, a ?pbx= read): the links of the PBXs sees keeps only
// (sees gets PBXState.Name, "" for the default PBX), the top level the
// worst of them. For one engine's snapshot (no PBXs) it is StatusJSON.
// Made per call, for the caller to keep.
func (s *Snapshot) StatusFor(sees func(pbx string) bool) []byte {
	if s.PBXs == nil {
		return s.status
	}
	return appendMultiStatus(nil, s.Version, s.PBXs, sees)
}

// StaleFor reports whether one of the PBXs sees keeps is stale (as
// StatusFor): what a read of those PBXs only says of its state. For one
// engine's snapshot it is Stale.
func (s *Snapshot) StaleFor(sees func(pbx string) bool) bool {
	if s.PBXs == nil {
		return s.Stale
	}
	_, stale, _ := aggregate(s.PBXs, sees)
	return stale
}

// PBXStale reports whether PBX pbx ("" the default) is stale; Stale for
// one engine's snapshot, true for a PBX it does not merge.
func (s *Snapshot) PBXStale(pbx string) bool {
	if s.PBXs == nil {
		return s.Stale
	}
	for _, st := range s.PBXs {
		if st.Name == pbx {
			return st.Stale
		}
	}
	return true
}

// worse orders the link states for the aggregate: down, stalled,
// resyncing, live.
func worse(a, b LinkState) bool {
	rank := func(l LinkState) int {
		switch l {
		case LinkDown:
			return 0
		case LinkStalled:
			return 1
		case LinkResyncing:
			return 2
		}
		return 3
	}
	return rank(a) < rank(b)
}

// appendMultiStatus is the status with the links of the PBXs sees keeps:
// {"pbx":"<worst>","version":N,"since":ms,"pbxs":{"default":{"pbx":"live","stale":false,"since":ms},"site2":{...}}}.
func appendMultiStatus(b []byte, version uint64, pbxs []PBXState, sees func(string) bool) []byte {
	link, _, since := aggregate(pbxs, sees)
	b = appendStatus(b, link, version, since)
	b = append(b[:len(b)-1], `,"pbxs":{`...)
	n := 0
	for _, st := range pbxs {
		if !sees(st.Name) {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		b = appendString(b, cmp.Or(st.Name, DefaultPBXName))
		b = append(b, `:{`...)
		b = appendStrField(b, "pbx", st.Link.String())
		b = append(b, ',')
		b = appendBoolField(b, "stale", st.Stale)
		b = append(b, ',')
		b = appendIntField(b, "since", st.Since)
		b = append(b, '}')
	}
	return append(b, '}', '}')
}

// multiStatus is a combined pbxStatus change's states, for readers of
// some PBXs (Change.StatusFor). It rides Change.ent, its JSON Data (full)
// in every class, rather than a field of its own: that field would make
// every Change 8 bytes bigger (80 to 88: the feed's ring, and every
// Feed.Since copy) for the rare pbxStatus.
type multiStatus struct {
	full    []byte
	version uint64
	pbxs    []PBXState
	changed string // the PBX whose link changed ("" the default)
}

func (m *multiStatus) json(Class) []byte { return m.full }

// StatusFor is a pbxStatus change as a reader of the PBXs sees keeps
// sees it (Snapshot.StatusFor), and whether the link that changed is one
// of theirs: when not, that reader has no news. For a change of one
// engine's feed it is Data and true.
func (c *Change) StatusFor(sees func(pbx string) bool) ([]byte, bool) {
	m, ok := c.ent.(*multiStatus)
	if !ok {
		return c.Data, true
	}
	if !sees(m.changed) {
		return nil, false
	}
	return appendMultiStatus(nil, m.version, m.pbxs, sees), true
}

// AsUnheard is s as a node that cannot hear the source of its state
// says it on its own (package bus: its op stream's consumer is silent,
// or its leader's heartbeat is late): stale, Unheard, the same Seq,
// Version and entities; a live link is shown stalled since ms since, a
// link that is not live (down, resyncing, stalled) as it is, since that
// is no claim that the state is current (a new leader's down and
// resyncing are told as they come). It is no state of the source: no
// change of the feed says it, so every node keeps the same seq for the
// same state (readers showing it must not let a client resume from it:
// ws names it with an epoch of its own). A copy sharing s's encoded
// pieces; one engine's snapshot only (a Multi's merges its sources'
// Link instead).
func (s *Snapshot) AsUnheard(since int64) *Snapshot {
	c := *s
	c.Stale, c.Unheard = true, true
	if s.Link == LinkLive {
		c.Link, c.Since = LinkStalled, since
	}
	c.status = appendStatus(nil, c.Link, s.Version, c.Since)
	return &c
}
