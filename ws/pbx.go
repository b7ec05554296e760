package ws

import (
	"maps"
	"slices"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// A user limited to some PBXs (auth.User.PBXs, when several PBXs are
// followed: docs/operations.md "Several PBXs") gets nothing of the others:
// their entities are left out of its snapshots (pbxColl) and their changes
// are not sent (frameFor, through seesPBX). The link status, which names
// every PBX's link, is sent to all.

// seesPBX reports whether c gets change p as far as PBXs go.
func seesPBX(c *conn, p *prep) bool {
	return p.kind == kindStatus || c.user.SeesID(p.ch.Key)
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
		if !u.SeesID(x) {
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
