package calls

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// unheardSource is an engine that its node may say is unheard (package
// bus's State), as a Multi's source.
type unheardSource struct {
	*Engine
	on   atomic.Bool
	seen atomic.Pointer[[2]*Snapshot]
}

func (u *unheardSource) Snapshot() *Snapshot {
	s := u.Engine.Snapshot()
	if !u.on.Load() {
		return s
	}
	if c := u.seen.Load(); c != nil && c[0] == s {
		return c[1] // the same pointer: the Multi sees no news
	}
	v := s.AsUnheard(42)
	u.seen.Store(&[2]*Snapshot{s, v})
	return v
}

// TestAsUnheard: an unheard snapshot is the engine's at the same seq
// and version, stalled and stale; the engine's feed gets no change of
// it, while a Multi merging it shows that PBX stalled, a pbxStatus change
// of the merge's own feed, and live again once heard.
func TestAsUnheard(t *testing.T) {
	p := newTwoPBXs(func() time.Time { return time.UnixMilli(1_700_000_000_000) })
	src := &unheardSource{Engine: p.b}
	m := NewMulti(0, []string{"", "site2"}, []Source{p.a, src})
	base := p.b.Snapshot()
	src.on.Store(true)
	u := src.Snapshot()
	if !u.Unheard || !u.Stale || u.Link != LinkStalled || u.Since != 42 || u.Seq != base.Seq || u.Version != base.Version ||
		!strings.Contains(string(u.StatusJSON()), `"pbx":"stalled"`) || base.Unheard || base.Stale {
		t.Fatalf("unheard %+v of %+v", u, base)
	}
	if string(u.ExtensionsJSON()) != string(base.ExtensionsJSON()) {
		t.Error("the unheard snapshot's entities differ from the engine's")
	}
	if p.b.Feed().LastSeq() != base.Seq {
		t.Error("the engine's feed moved")
	}
	last := m.Feed().LastSeq()
	s := m.Sync(1)
	if s.PBXStale("") || !s.PBXStale("site2") || s.Link != LinkStalled {
		t.Fatalf("merged: default stale %v, site2 stale %v, link %v", s.PBXStale(""), s.PBXStale("site2"), s.Link)
	}
	cs, _ := m.Feed().Since(last)
	if len(cs) != 1 || cs[0].Type != PBXStatus || !strings.Contains(string(cs[0].Data), `"site2":{"pbx":"stalled"`) {
		t.Fatalf("merged changes: %+v", cs)
	}
	if m.Sync(1) != s {
		t.Error("the same unheard snapshot merged again")
	}
	src.on.Store(false)
	if s := m.Sync(1); s.Stale || s.Link != LinkLive {
		t.Errorf("heard again: merged stale %v link %v", s.Stale, s.Link)
	}
}
