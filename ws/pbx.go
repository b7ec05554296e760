package ws

import (
	"cmp"
	"errors"
	"slices"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// When several PBXs are followed (docs/operations.md "Several PBXs"), a
// client subscribed to some PBXs ("pbxs" in its subscribe), or whose user
// is limited to some (auth.User.PBXs), gets nothing of the others: their
// entities are left out of its snapshots (pbxColl) and their changes are
// not sent (frameFor, through seesPBX). Its link status (the snapshot's
// "pbx" and "stale", the pbxStatus events) names the links of the PBXs
// it gets only, the top level the worst of those, and a change of
// another PBX's link is not sent to it (calls.Change.StatusFor).

// pbxLimited reports whether c gets only some PBXs.
func (c *conn) pbxLimited() bool { return c.pbxs != nil || c.user.PBXLimited() }

// seesID reports whether c gets the entity of a combined id ("site2:201").
func (c *conn) seesID(id string) bool { return c.seesPBXName(pbxOf(id)) }

// pbxOf is the PBX of a combined id ("" the default).
func pbxOf(id string) string {
	pbx, _ := calls.SplitID(id, func(n string) bool { return calls.CheckPBXName(n) == nil })
	return pbx
}

// seesPBXName reports whether c gets PBX name ("" the default).
func (c *conn) seesPBXName(name string) bool {
	return c.user.SeesPBX(name) && (c.pbxs == nil || slices.Contains(c.pbxs, cmp.Or(name, calls.DefaultPBXName)))
}

// statusFrame is pbxStatus change p as c, limited to some PBXs, gets it,
// or nil when the link that changed is not one of theirs. Made once per
// PBX set (the user's, the subscribe's) among the change's first
// maxStatusSets, then per client.
func statusFrame(c *conn, p *prep) *frame {
	key := c.user.PBXKey()
	for _, m := range p.status {
		if m.user == key && slices.Equal(m.sub, c.pbxs) {
			return m.f
		}
	}
	var f *frame
	if data, news := p.ch.StatusFor(c.seesPBXName); news {
		f = &frame{b: eventFrame(p.ch, data), seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
	}
	if len(p.status) < maxStatusSets {
		p.status = append(p.status, statusMemo{user: key, sub: c.pbxs, f: f})
	}
	return f
}

// statusMemo is a pbxStatus frame (nil: no news) of the clients of one
// PBX set: their user's (auth.User.PBXKey) and their subscribe's pbxs.
type statusMemo struct {
	user string
	sub  []string
	f    *frame
}

// maxStatusSets bounds a change's statusMemos, so that the lookup stays
// short when nearly every client has a set of its own.
const maxStatusSets = 16

// seesPBX reports whether c gets change p as far as PBXs go.
func seesPBX(c *conn, p *prep) bool {
	if p.kind == calls.PBXStatus {
		return true
	}
	if !p.pbxOK {
		p.pbx, p.pbxOK = pbxOf(p.ch.Key), true
	}
	return c.seesPBXName(p.pbx)
}

// checkPBXs accepts a subscribe's pbxs: PBX names or "default", at most
// 64 of them. Nil (not given) is all; an empty list is an error.
func checkPBXs(pbxs []string) error {
	if pbxs == nil {
		return nil
	}
	if len(pbxs) == 0 || len(pbxs) > 64 {
		return errors.New("pbxs: 1 to 64 PBX names (or leave it out for all)")
	}
	for _, n := range pbxs {
		if n != calls.DefaultPBXName && calls.CheckPBXName(n) != nil {
			return errors.New("pbxs: " + quote(n) + " is not a PBX name")
		}
	}
	return nil
}

// pbxColl is collection k of s as c sees it: the entities of the PBXs it
// sees, each in the class its view shows it in (as for a client not
// limited: an extension by its own, the others by the calls no extension
// owns), the engine's bytes picked (calls.Snapshot.CollectionWhere). Made
// per client and snapshot: limited users are few and snapshots rare
// (connect, resync).
func pbxColl(c *conn, s *calls.Snapshot, k calls.ChangeType) []byte {
	v := auth.ViewOf(c.user)
	unowned := func(string) calls.Class { return v.Class("") }
	switch k {
	case calls.ExtenUpdate:
		return s.CollectionWhere(calls.CollExtensions, c.seesID, v.Class)
	case calls.QueueUpdate:
		return s.CollectionWhere(calls.CollQueues, c.seesID, unowned)
	case calls.ParkingUpdate:
		return s.CollectionWhere(calls.CollParkings, c.seesID, unowned)
	case calls.TrunkUpdate:
		return s.CollectionWhere(calls.CollTrunks, c.seesID, unowned)
	}
	return s.PresenceJSONWhere(c.seesID) // calls.UserPresenceUpdate: never hidden
}

// LocalState is a State whose node may say on its own that the state it
// serves is stale (package bus: a node that cannot hear its op stream),
// outside the feed: its Snapshot is then Unheard (stalled, stale, at the
// feed's seq) and LocalChanged's channel is closed at each change of
// that. The hub then sends every subscribed client a fresh snapshot, or
// a pbxStatus at its seq when it takes status deltas (unheard.go); an
// Unheard snapshot names an epoch of its own (unheardEpoch), so that no
// client resumes from it, here or on another node, and a resume asked
// while the state is Unheard gets a snapshot. The feed may still move
// then (a catch-up): its changes go out, but no pbxStatus (frameFor),
// whose link would say live while the node says it cannot hear, but to
// the clients taking status deltas, as the node says it (stalled).
type LocalState interface {
	State
	LocalChanged() <-chan struct{}
}

// unheardEpoch is the epoch of a snapshot s, Unheard or not.
func (h *Hub) unheardEpoch(s *calls.Snapshot) string {
	if s.Unheard {
		return h.epoch + "-unheard"
	}
	return h.epoch
}

// localChanged is the state's LocalChanged, or nil.
func (h *Hub) localChanged() <-chan struct{} {
	if l, ok := h.state.(LocalState); ok {
		return l.LocalChanged()
	}
	return nil
}

// resyncAll sends every subscribed client a fresh snapshot.
func (h *Hub) resyncAll(reason string) {
	for _, c := range h.clients {
		if c.subscribed {
			h.resync(c, reason)
		}
	}
}
