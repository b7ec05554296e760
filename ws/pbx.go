package ws

import (
	"cmp"
	"errors"
	"maps"
	"slices"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// When several PBXs are followed (docs/operations.md "Several PBXs"), a
// client subscribed to some PBXs ("pbxs" in its subscribe), or whose user
// is limited to some (auth.User.PBXs), gets nothing of the others: their
// entities are left out of its snapshots (pbxColl) and their changes are
// not sent (frameFor, through seesPBX). The link status, which names
// every PBX's link, is sent to all.

// pbxLimited reports whether c gets only some PBXs.
func (c *conn) pbxLimited() bool { return c.pbxs != nil || c.user.PBXLimited() }

// seesID reports whether c gets the entity of a combined id ("site2:201").
func (c *conn) seesID(id string) bool {
	if !c.user.SeesID(id) {
		return false
	}
	if c.pbxs == nil {
		return true
	}
	pbx, _ := calls.SplitID(id, func(n string) bool { return calls.CheckPBXName(n) == nil })
	return slices.Contains(c.pbxs, cmp.Or(pbx, calls.DefaultPBXName))
}

// seesPBX reports whether c gets change p as far as PBXs go.
func seesPBX(c *conn, p *prep) bool {
	return p.kind == kindStatus || c.seesID(p.ch.Key)
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
// sees, each redacted as its view wants. Made per client and snapshot:
// limited users are few and snapshots rare (connect, resync).
func pbxColl(c *conn, s *calls.Snapshot, k kind) []byte {
	u := c.user
	v := auth.ViewOf(u)
	var keys []string
	var get func(string) []byte
	switch k {
	case kindExt:
		keys = s.Extensions.Keys()
		get = func(x string) []byte { return v.Extension(x, s.ExtensionJSON(x)) }
	case kindQueue:
		keys, get = slices.Sorted(maps.Keys(s.Queues)), func(x string) []byte { return v.Queue(s.QueueJSON(x)) }
	case kindPark:
		keys, get = slices.Sorted(maps.Keys(s.Parkings)), func(x string) []byte { return v.Parking(s.ParkingJSON(x)) }
	case kindTrunk:
		keys, get = slices.Sorted(maps.Keys(s.Trunks)), func(x string) []byte { return v.Trunk(s.TrunkJSON(x)) }
	case kindPresence:
		keys = s.Extensions.Keys()
		get = func(x string) []byte {
			ext := s.Extensions.Get(x)
			return appendString(nil, calls.PresenceOf(&ext, ""))
		}
	}
	b := []byte{'{'}
	for _, x := range keys {
		if !c.seesID(x) {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendString(b, x)
		b = append(b, ':')
		b = append(b, get(x)...)
	}
	return append(b, '}')
}
