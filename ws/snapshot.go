package ws

import (
	"maps"
	"slices"
	"strconv"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// A snapshot frame is a list of pieces, most of them shared: the engine's
// collection JSON for clients that see everything, and for the others a
// redacted collection made once per snapshot version with the entities
// they may see spliced in. A client's snapshot therefore costs a few small
// allocations, not a copy of the state.

// pieces accumulates a frame payload: small parts are copied into cur,
// large shared slices are kept as they are.
type pieces struct {
	list [][]byte
	cur  []byte
	n    int
}

func (p *pieces) str(s string) { p.cur = append(p.cur, s...) }

func (p *pieces) big(b []byte) {
	if len(b) < 256 {
		p.cur = append(p.cur, b...)
		return
	}
	p.flush()
	p.list = append(p.list, b)
	p.n += len(b)
}

func (p *pieces) flush() {
	if len(p.cur) > 0 {
		p.list = append(p.list, p.cur)
		p.n += len(p.cur)
		p.cur = nil
	}
}

func (p *pieces) frame(seq uint64, at int64) *frame {
	p.flush()
	hdr := make([]byte, headerLen(p.n))
	putHeader(hdr, opText, p.n)
	return &frame{b: hdr, more: p.list, seq: seq, at: at, msgs: 1, kind: frameSnapshot}
}

// redColl is a collection as a user who may see no call details sees it,
// with the offsets of each entity's JSON in it.
type redColl struct {
	b   []byte
	off map[string][2]int
}

// memo remembers an entity's redacted JSON while its source bytes are the
// same (calls shares unchanged entities' JSON between snapshots).
type memo struct {
	src *byte
	red []byte
}

// verCache holds what was made for one snapshot version. Run only.
type verCache struct {
	snap  *calls.Snapshot
	colls [numKinds]*redColl
}

func (h *Hub) redacted(s *calls.Snapshot, k kind) *redColl {
	if h.vc.snap != s {
		h.vc = verCache{snap: s}
	}
	if rc := h.vc.colls[k]; rc != nil {
		return rc
	}
	var keys []string
	var get func(string) []byte
	switch k {
	case kindExt:
		keys, get = s.Extensions.Keys(), s.ExtensionJSON
	case kindQueue:
		keys, get = slices.Sorted(maps.Keys(s.Queues)), s.QueueJSON
	case kindPark:
		keys, get = slices.Sorted(maps.Keys(s.Parkings)), s.ParkingJSON
	case kindTrunk:
		keys, get = slices.Sorted(maps.Keys(s.Trunks)), s.TrunkJSON
	}
	old := h.memo[k]
	next := make(map[string]memo, len(keys))
	rc := &redColl{off: make(map[string][2]int, len(keys))}
	b := []byte{'{'}
	for i, key := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, key)
		b = append(b, ':')
		src := get(key)
		if len(src) == 0 {
			src = []byte("null")
		}
		m, ok := old[key]
		if !ok || m.src != &src[0] {
			m = memo{src: &src[0], red: redact(k, key, src)}
		}
		next[key] = m
		start := len(b)
		b = append(b, m.red...)
		rc.off[key] = [2]int{start, len(b)}
	}
	rc.b = append(b, '}')
	h.memo[k] = next
	h.vc.colls[k] = rc
	return rc
}

// snapshotFrame encodes
// {"op":"snapshot","seq":N,"version":V,"epoch":E,"stale":B,"pbx":{..},
// "extensions":{..},"queues":{..},"parkings":{..},"trunks":{..},"me":{..}}
// with the collections of c's topics, as c may see them.
func (h *Hub) snapshotFrame(c *conn, s *calls.Snapshot, at int64) *frame {
	var p pieces
	p.cur = make([]byte, 0, 256)
	p.str(`{"op":"snapshot","seq":`)
	p.cur = strconv.AppendUint(p.cur, s.Seq, 10)
	p.str(`,"version":`)
	p.cur = strconv.AppendUint(p.cur, s.Version, 10)
	p.str(`,"epoch":`)
	p.cur = appendString(p.cur, h.epoch)
	p.str(`,"stale":`)
	p.cur = strconv.AppendBool(p.cur, s.Stale)
	p.str(`,"pbx":`)
	p.big(s.StatusJSON())
	t := c.topics
	if t&topicExtensions != 0 {
		p.str(`,"extensions":`)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, kindExt))
		} else if c.full {
			p.big(s.ExtensionsJSON())
		} else {
			h.spliceExtensions(&p, c, s)
		}
	}
	coll := func(bit uint8, name string, k kind, all func() []byte) {
		if t&bit == 0 {
			return
		}
		p.str(name)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, k))
		} else if c.seesUnowned {
			p.big(all())
		} else {
			p.big(h.redacted(s, k).b)
		}
	}
	coll(topicQueues, `,"queues":`, kindQueue, s.QueuesJSON)
	coll(topicParkings, `,"parkings":`, kindPark, s.ParkingsJSON)
	coll(topicTrunks, `,"trunks":`, kindTrunk, s.TrunksJSON)
	if t&topicPresence != 0 {
		p.str(`,"presence":`)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, kindPresence))
		} else {
			p.big(s.PresenceJSON())
		}
	}
	if t&topicMe != 0 {
		u := c.user
		p.str(`,"me":{"username":`)
		p.cur = appendString(p.cur, u.Username)
		p.str(`,"endpoints":`)
		p.cur = appendStrings(p.cur, u.Endpoints)
		p.str(`,"extensions":{`)
		v := auth.ViewOf(u)
		first := true
		for _, e := range u.Endpoints {
			data := s.ExtensionJSON(e)
			if data == nil {
				continue
			}
			if !first {
				p.str(",")
			}
			first = false
			p.cur = appendString(p.cur, e)
			p.str(":")
			p.big(v.Extension(e, data))
		}
		p.str("}}")
	}
	p.str("}")
	return p.frame(s.Seq, at)
}

// spliceExtensions writes the extensions collection as c sees it: the
// redacted collection, with the extensions c may see in full spliced in.
func (h *Hub) spliceExtensions(p *pieces, c *conn, s *calls.Snapshot) {
	rc := h.redacted(s, kindExt)
	type span struct {
		start, end int
		data       []byte
	}
	var seen []span
	for _, e := range c.user.Scope() {
		if o, ok := rc.off[e]; ok && auth.Allowed(c.user, auth.SeeCalls, e) {
			seen = append(seen, span{o[0], o[1], s.ExtensionJSON(e)})
		}
	}
	slices.SortFunc(seen, func(a, b span) int { return a.start - b.start })
	prev := 0
	for _, sp := range seen {
		p.big(rc.b[prev:sp.start])
		p.big(sp.data)
		prev = sp.end
	}
	p.big(rc.b[prev:])
}

func appendUint(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 10) }
func appendInt(b []byte, n int64) []byte   { return strconv.AppendInt(b, n, 10) }
