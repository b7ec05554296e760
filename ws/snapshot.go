package ws

import (
	"strconv"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// A snapshot frame is a list of pieces, most of them shared: the engine's
// collection JSON of the client's visibility class (calls.Class), the
// extensions as the hidden collection's pieces with the extensions the
// client sees in full put in (calls.Snapshot.ExtensionsFor). A client's
// snapshot therefore costs a few small allocations, not a copy of the
// state.

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
	p.cur = appendString(p.cur, h.unheardEpoch(s))
	stale, status := s.Stale, s.StatusJSON()
	if c.pbxLimited() {
		stale, status = s.StaleFor(c.seesPBXName), s.StatusFor(c.seesPBXName)
	}
	p.str(`,"stale":`)
	p.cur = strconv.AppendBool(p.cur, stale)
	p.str(`,"pbx":`)
	p.big(status)
	t := c.topics
	v := auth.ViewOf(c.user)
	if t&topicExtensions != 0 {
		p.str(`,"extensions":`)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, calls.ExtenUpdate))
		} else if c.full {
			p.big(s.ExtensionsJSON())
		} else {
			for _, part := range s.ExtensionsFor(v.FullExtensions()) {
				p.big(part)
			}
		}
	}
	cls := calls.NumbersHidden
	if c.seesUnowned {
		cls = calls.Full
	}
	coll := func(bit uint8, name string, k calls.ChangeType, all func(calls.Class) []byte) {
		if t&bit == 0 {
			return
		}
		p.str(name)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, k))
		} else {
			p.big(all(cls))
		}
	}
	coll(topicQueues, `,"queues":`, calls.QueueUpdate, s.QueuesJSONAs)
	coll(topicParkings, `,"parkings":`, calls.ParkingUpdate, s.ParkingsJSONAs)
	coll(topicTrunks, `,"trunks":`, calls.TrunkUpdate, s.TrunksJSONAs)
	if t&topicPresence != 0 {
		p.str(`,"presence":`)
		if c.pbxLimited() {
			p.big(pbxColl(c, s, calls.UserPresenceUpdate))
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
		first := true
		for _, e := range u.Endpoints {
			data := s.ExtensionJSONAs(e, v.Class(e))
			if data == nil {
				continue
			}
			if !first {
				p.str(",")
			}
			first = false
			p.cur = appendString(p.cur, e)
			p.str(":")
			p.big(data)
		}
		p.str("}}")
	}
	p.str("}")
	return p.frame(s.Seq, at)
}

func appendUint(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 10) }
func appendInt(b []byte, n int64) []byte   { return strconv.AppendInt(b, n, 10) }
