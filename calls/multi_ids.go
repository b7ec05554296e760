package calls

import (
	"maps"
	"strings"
)

// How a named PBX's entities and notifications are qualified in the
// combined state (multi.go): every id that names one of its entities
// (extension, conversation, owner, queue, queue member, parking space,
// trunk, conference, a conference member's extension) becomes
// "site2:<id>", and every object gets "pbx":"site2". Numbers that are
// dialled (counterpartNum, a waiting or parked caller's num) and channel
// names outside conversation ids stay as the PBX gives them.

func (src *multiSrc) q(id string) string { return QualifyID(src.name, id) }

func (src *multiSrc) qualifyConvs(m map[string]Conversation) map[string]Conversation {
	if m == nil {
		return nil
	}
	out := make(map[string]Conversation, len(m))
	for _, c := range m {
		c.ID, c.Owner, c.QueueID, c.PBX = src.q(c.ID), src.q(c.Owner), src.q(c.QueueID), src.name
		if c.Extra != nil {
			x := *c.Extra
			x.Parked.Parking, x.Parked.By, x.Spy.Exten = src.q(x.Parked.Parking), src.q(x.Parked.By), src.q(x.Spy.Exten)
			c.Extra = &x
		}
		out[c.ID] = c
	}
	return out
}

func (src *multiSrc) qualifyExt(v Extension) Extension {
	v.Exten, v.PBX, v.Conversations = src.q(v.Exten), src.name, src.qualifyConvs(v.Conversations)
	return v
}

func (src *multiSrc) qualifyTrunk(v Trunk) Trunk {
	if src.name == "" {
		return v
	}
	v.Name, v.PBX, v.Conversations = src.q(v.Name), src.name, ConvMapOf(src.qualifyConvs(v.Conversations.Map()))
	return v
}

// qualifyTrunkFrom is qualifyTrunk(v) made from mine, the Multi's
// qualified trunk of before: the conversations v changed since before
// qualified, the others shared (a trunk holds a thousand; a change, a few).
func (src *multiSrc) qualifyTrunkFrom(before, mine *Trunk, v Trunk) Trunk {
	var w convWriter
	w.begin(mine.Conversations)
	before.Conversations.diff(v.Conversations, func(it *convItem) {
		for _, cv := range src.qualifyConvs(map[string]Conversation{it.cv.ID: it.cv}) {
			w.set(newConvItem(cv))
		}
	}, func(id string) { w.del(src.q(id)) })
	v.Name, v.PBX, v.Conversations = src.q(v.Name), src.name, w.m
	return v
}

func (src *multiSrc) qualifyMember(mb QueueMember) QueueMember {
	mb.Queue, mb.Member = src.q(mb.Queue), src.q(mb.Member)
	return mb
}

func (src *multiSrc) qualifyQueue(v Queue) Queue {
	if src.name == "" {
		return v
	}
	v.Queue, v.PBX = src.q(v.Queue), src.name
	members := make(map[string]*QueueMember, len(v.Members))
	for _, mb := range v.Members {
		q := src.qualifyMember(*mb)
		members[q.Member] = &q
	}
	v.Members, v.WaitingCallers = members, maps.Clone(v.WaitingCallers)
	v.pieces = nil // of the unqualified members
	return v
}

func (src *multiSrc) qualifyParking(v Parking) Parking {
	if src.name == "" {
		return v
	}
	v.Parking, v.PBX = src.q(v.Parking), src.name
	if v.ParkedCaller != nil {
		c := *v.ParkedCaller
		c.ParkedBy = src.q(c.ParkedBy)
		v.ParkedCaller = &c
	}
	return v
}

// qualifyConf qualifies a room; a member's extenId only when it is one of
// the PBX's extensions (it may be an outside caller's number).
func (src *multiSrc) qualifyConf(v Conference, cur *Snapshot) Conference {
	if src.name == "" {
		return v
	}
	v.ID, v.PBX = src.q(v.ID), src.name
	users := make(map[string]ConfUser, len(v.Users))
	for k, u := range v.Users {
		if _, ok := cur.Extensions.Lookup(u.ExtenID); ok {
			u.ExtenID = src.q(u.ExtenID)
		}
		users[k] = u
	}
	v.Users = users
	return v
}

// events appends the engine's notifications of type typ, qualified for a
// named PBX.
func (src *multiSrc) events(ch, events []Change, cur *Snapshot, typ ChangeType) []Change {
	for _, e := range events {
		if e.Type != typ {
			continue
		}
		if src.name != "" {
			var ok bool
			if e, ok = src.qualifyEvent(e, cur); !ok {
				continue
			}
		} else if typ == QueueMemberUpdate && memberOf(cur, e.Key) == nil {
			continue // removed since: the queue's change says so
		}
		e.Seq = 0
		ch = append(ch, e)
	}
	return ch
}

// memberOf is the member a queueMemberUpdate's key "<queue>/<member>"
// names in s, nil when it is not (or no longer) a member.
func memberOf(s *Snapshot, key string) *QueueMember {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return nil
	}
	return s.Queues.Get(key[:i]).Members[key[i+1:]]
}

// qualifyEvent is notification e qualified for a named PBX, read from its
// value (a queue member from cur); false when it has none to read (a
// member removed since: its queue's change says so).
func (src *multiSrc) qualifyEvent(e Change, cur *Snapshot) (Change, bool) {
	switch e.Type {
	case UserPresenceUpdate:
		v, ok := e.Presence()
		if !ok {
			return e, false
		}
		q := valueChange(UserPresenceUpdate, src.q(v.Exten), Presence{Exten: src.q(v.Exten), Status: v.Status}, e.At, src.name, appendPresence)
		e.Key, e.Data, e.ent = q.Key, q.Data, q.ent
	case ExtenRinging:
		v, ok := e.Ringing()
		if !ok {
			return e, false
		}
		r := *v
		r.Exten, r.Queue, r.Convid = src.q(v.Exten), src.q(v.Queue), src.q(v.Convid)
		q := valueChange(ExtenRinging, r.Exten, r, e.At, src.name, appendRinging)
		e.Key, e.Data, e.ent = q.Key, q.Data, q.ent
	case QueueMemberUpdate:
		p := memberOf(cur, e.Key)
		if p == nil {
			return e, false // removed since: the queue's change says so
		}
		mb := src.qualifyMember(*p)
		e.Key, e.Data = mb.Queue+"/"+mb.Member, appendMemberUpdate(nil, &mb)
	default:
		e.Key = src.q(e.Key)
	}
	return e, true
}
