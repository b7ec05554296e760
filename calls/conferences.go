package calls

import (
	"maps"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Conferences (app_confbridge): rooms and their members from the
// Confbridge* events, and from the ConfbridgeListRooms / ConfbridgeList
// lists at resync. Asterisk 22 emits no event when a room is locked or
// unlocked: Locked comes from ConfbridgeListRooms (and from
// ConfbridgeLock/ConfbridgeUnlock events, should a PBX send them).

// Conference is one ConfBridge room keyed by its name ("1000").
type Conference struct {
	ID     string
	Locked bool
	Users  map[string]ConfUser // by ConfUser.ID
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
}

// ConfUser is a member of a conference.
type ConfUser struct {
	ID       string // the member channel's Uniqueid
	Name     string
	Owner    bool // ConfBridge admin
	Muted    bool
	Talking  bool
	ExtenID  string // the extension (or caller number) of the member
	JoinTime int64  // ms since the epoch
	Channel  string // for actions (ConfbridgeMute/Kick); not in the JSON
}

type confState struct {
	id     string
	locked bool
	users  map[string]*ConfUser // by Uniqueid
	listed bool                 // confirmed by ConfbridgeListRooms in the running resync
	// listedUsers: members confirmed by ConfbridgeList in the running
	// resync; nil when no ConfbridgeList answer arrived for the room.
	listedUsers map[string]bool
}

// maxConfs bounds the rooms a misbehaving peer can make the engine hold.
const maxConfs = 10000

func (e *Engine) ensureConf(id string) *confState {
	if id == "" {
		return nil
	}
	c := e.confs[id]
	if c == nil {
		if len(e.confs) >= maxConfs {
			e.stats.Unknown++
			return nil
		}
		c = &confState{id: strings.Clone(id), users: map[string]*ConfUser{}}
		e.confs[c.id] = c
	}
	e.dirtyConf[c.id] = struct{}{}
	return c
}

func yes(s string) bool { return strings.EqualFold(s, "yes") || s == "1" || strings.EqualFold(s, "on") }

// onConfEvent handles the Confbridge* live events and list items.
func (e *Engine) onConfEvent(m ami.Message, ev string) {
	id := m.Get("Conference")
	switch ev {
	case ami.EventConfbridgeStart:
		e.ensureConf(id)
		return
	case ami.EventConfbridgeEnd:
		e.endConf(id)
		return
	case ami.EventConfbridgeLock, ami.EventConfbridgeUnlock:
		if c := e.ensureConf(id); c != nil {
			c.locked = ev == ami.EventConfbridgeLock
		}
		return
	case ami.EventConfbridgeListRooms:
		if !e.resync.active && e.confs[id] == nil {
			return // a late answer must not bring back a room that ended
		}
		if c := e.ensureConf(id); c != nil {
			c.locked = yes(m.Get("Locked"))
			if e.resync.active {
				c.listed, e.resync.roomsListed = true, true
				// Its members, who may have joined while the link was
				// down: answered before EndResync (follow-ups).
				e.ask(ami.NewAction(ami.ActionConfbridgeList, "Conference", id))
			}
		}
		return
	}
	ch := e.chanOf(m)
	if ch == nil {
		return
	}
	switch ev {
	case ami.EventConfbridgeJoin:
		e.confJoin(m, ch, id)
	case ami.EventConfbridgeLeave:
		e.confLeave(ch)
		e.onConfbridge(m, false)
	case ami.EventConfbridgeList:
		e.confJoin(m, ch, id)
		if c := e.confs[id]; c != nil && e.resync.active {
			if c.listedUsers == nil {
				c.listedUsers = map[string]bool{}
			}
			c.listedUsers[ch.uid] = true
		}
	case ami.EventConfbridgeMute, ami.EventConfbridgeUnmute:
		if u := e.confUser(ch); u != nil {
			u.Muted = ev == ami.EventConfbridgeMute
		}
	case ami.EventConfbridgeTalking:
		if u := e.confUser(ch); u != nil {
			u.Talking = yes(m.Get("TalkingStatus"))
		}
	}
}

// confJoin adds (or refreshes, for a list item) ch as a member of room id.
func (e *Engine) confJoin(m ami.Message, ch *channel, id string) {
	if r := ch.get().confRoom; r != "" && r != id {
		e.confLeave(ch)
	}
	c := e.ensureConf(id)
	if c == nil {
		return
	}
	e.onConfbridge(m, true)
	ch.more().confRoom = c.id
	u := c.users[ch.uid]
	if u == nil {
		u = &ConfUser{ID: ch.uid, Channel: ch.name, JoinTime: e.nowMs()}
		if t, ok := m.Lookup("AnsweredTime"); ok {
			// A list item: the member was there before we looked.
			u.JoinTime -= int64(atoi(t)) * 1000
		}
		c.users[ch.uid] = u
	}
	u.Owner = yes(m.Get("Admin")) // an admin, or (below) the extension the room is named after
	if v, ok := m.Lookup("Muted"); ok {
		u.Muted = yes(v)
	}
	if v, ok := m.Lookup("Talking"); ok {
		u.Talking = yes(v)
	}
	u.ExtenID = ch.callerNum
	if ch.kind == ownerExt {
		u.ExtenID = ch.owner
	}
	u.Name = ""
	if known(ch.callerName) {
		u.Name = ch.callerName
	}
	if x := e.exts[u.ExtenID]; x != nil && x.displayName() != "" {
		u.Name = x.displayName()
	}
	if u.ExtenID == c.id {
		u.Owner = true // ctibridge's "my conference" is the room named by one's extension
	}
}

func (e *Engine) confUser(ch *channel) *ConfUser {
	c := e.confs[ch.get().confRoom]
	if c == nil {
		return nil
	}
	e.dirtyConf[c.id] = struct{}{}
	return c.users[ch.uid]
}

// confLeave removes ch from its room (ConfbridgeLeave, or its hangup).
func (e *Engine) confLeave(ch *channel) {
	if c := e.confs[ch.get().confRoom]; c != nil {
		delete(c.users, ch.uid)
		e.dirtyConf[c.id] = struct{}{}
	}
	if ch.m != nil {
		ch.m.confRoom = ""
	}
}

func (e *Engine) endConf(id string) {
	c := e.confs[id]
	if c == nil {
		return
	}
	for uid := range c.users {
		if ch := e.chans[uid]; ch != nil && ch.m != nil && ch.m.confRoom == id {
			ch.m.confRoom = ""
		}
	}
	delete(e.confs, id)
	e.dirtyConf[id] = struct{}{}
}

// beginConfResync forgets what the previous resync confirmed.
func (e *Engine) beginConfResync() {
	for _, c := range e.confs {
		c.listed, c.listedUsers = false, nil
	}
	e.resync.roomsListed = false
}

// endConfResync drops what the lists did not confirm: members whose
// channel is gone (dropped as ghosts, so a conference that ended while the
// link was down empties), members a ConfbridgeList answer for their room
// left out, rooms left empty, and rooms ConfbridgeListRooms left out when
// it answered. It returns the number of repairs.
func (e *Engine) endConfResync() int {
	repairs := 0
	for id, c := range e.confs {
		for uid := range c.users {
			ch := e.chans[uid]
			if ch == nil || (c.listedUsers != nil && !c.listedUsers[uid]) {
				if ch != nil {
					if ch.m != nil {
						ch.m.confRoom = ""
					}
					ch.conference = false
					e.changed(ch)
				}
				delete(c.users, uid)
				e.dirtyConf[id] = struct{}{}
				repairs++
			}
		}
		if len(c.users) == 0 || (e.resync.roomsListed && !c.listed) {
			e.endConf(id)
			repairs++
		}
		c.listed, c.listedUsers = false, nil
	}
	return repairs
}

func (c *confState) view() Conference {
	v := Conference{ID: c.id, Locked: c.locked, Users: make(map[string]ConfUser, len(c.users))}
	for k, u := range c.users {
		v.Users[k] = *u
	}
	return v
}

func confEqual(a, b *Conference) bool {
	return a.ID == b.ID && a.Locked == b.Locked && maps.Equal(a.Users, b.Users)
}

// appendConference writes a room; at is unused. In a class that hides
// numbers a member's extenId and name are blank unless sees (nil: none)
// says its reader may see that member's calls (an outside caller's entry
// carries its number).
func appendConference(b []byte, c *Conference, _ int64, e enc) []byte {
	return appendConferenceFor(b, c, e, nil)
}

func appendConferenceFor(b []byte, c *Conference, e enc, sees func(exten string) bool) []byte {
	b = append(b, '{')
	b = appendStrField(b, "id", c.ID)
	b = append(b, ',')
	b = appendBoolField(b, "locked", c.Locked)
	b = append(b, ',')
	b = appendKey(b, "users")
	b = append(b, '{')
	for i, k := range sortedKeys(c.Users) {
		if i > 0 {
			b = append(b, ',')
		}
		u := c.Users[k]
		m := e
		if m.hide && memberSeen(&u, sees) {
			m = enc{}
		}
		b = appendString(b, k)
		b = append(b, ':', '{')
		b = appendStrField(b, "id", u.ID)
		b = append(b, ',')
		b = m.secret(appendKey(b, "name"), u.Name)
		b = append(b, ',')
		b = appendBoolField(b, "owner", u.Owner)
		b = append(b, ',')
		b = appendBoolField(b, "muted", u.Muted)
		b = append(b, ',')
		b = appendBoolField(b, "talking", u.Talking)
		b = append(b, ',')
		b = m.secret(appendKey(b, "extenId"), u.ExtenID)
		b = append(b, ',')
		b = appendIntField(b, "joinTime", u.JoinTime)
		b = append(b, '}')
	}
	b = append(b, '}')
	return append(appendPBX(b, c.PBX), '}')
}

func memberSeen(u *ConfUser, sees func(string) bool) bool {
	return sees != nil && u.ExtenID != "" && sees(u.ExtenID)
}

// ExtenIDs yields the extenId of each member (an extension, or an outside
// caller's number), in no particular order.
func (c *Conference) ExtenIDs(yield func(string) bool) {
	for _, u := range c.Users {
		if !yield(u.ExtenID) {
			return
		}
	}
}

// conferenceFor is room x's JSON for a reader who sees the calls of the
// members sees says yes to: the full bytes when that is every member,
// otherwise the others' extenId and name blank.
func conferenceFor(x *ent[Conference], sees func(exten string) bool) []byte {
	if x == nil {
		return nil
	}
	for _, u := range x.v.Users {
		if !memberSeen(&u, sees) {
			return appendConferenceFor(make([]byte, 0, len(x.full)), &x.v, enc{hide: true, op: x.op}, sees)
		}
	}
	return x.full
}

// publishConfs encodes the rooms changed since the last Publish; a room
// that ended is removed and announced with no users.
func (e *Engine) publishConfs(ch []Change, now int64) []Change {
	if len(e.dirtyConf) == 0 {
		return ch
	}
	p := &e.pub
	for _, k := range sortedSet(e.dirtyConf, cmpString) {
		c := e.confs[k]
		if c == nil {
			if _, ok := p.confs[k]; !ok {
				continue
			}
			p.setConf(k, nil)
			x := newEnt(Conference{ID: k}, now, e.cfg.Opaque, appendConference, 32)
			ch = append(ch, Change{Type: ConferenceUpdate, Key: k, Data: x.full, At: now, ent: x})
			continue
		}
		v := c.view()
		if old, ok := p.confs[k]; ok && confEqual(&old, &v) {
			continue
		}
		x := newEnt(v, now, e.cfg.Opaque, appendConference, p.conf.ents[k].size())
		p.setConf(k, x)
		ch = append(ch, Change{Type: ConferenceUpdate, Key: k, Data: x.full, At: now, ent: x})
	}
	resetSet(&e.dirtyConf)
	return ch
}

// setConf sets (x non-nil) or removes a published room.
func (p *published) setConf(k string, x *ent[Conference]) {
	if !p.confCopied {
		p.confs, p.conf, p.confCopied = maps.Clone(p.confs), p.conf.clone(), true
	}
	if x == nil {
		delete(p.confs, k)
		delete(p.conf.ents, k)
		return
	}
	p.confs[k], p.conf.ents[k] = x.v, x
}

// ConferenceJSON is one room's JSON, or nil when it does not exist.
func (s *Snapshot) ConferenceJSON(id string) []byte { return s.conf.ents[id].json(Full) }

// ConferenceJSONFor is one room's JSON (nil when it does not exist) for
// a reader who sees the calls of the members whose extenId sees says yes
// to: the others' extenId and name are blank.
func (s *Snapshot) ConferenceJSONFor(id string, sees func(exten string) bool) []byte {
	return conferenceFor(s.conf.ents[id], sees)
}

// ConferencesJSON is {"1000":{...},...} in key order.
func (s *Snapshot) ConferencesJSON() []byte { return s.conf.bytes(Full) }

// confRefreshFollowups re-reads the rooms while any is in use: Asterisk 22
// raises no event when a room is locked or unlocked, so Locked is only as
// old as the last refresh (or the last lock_conf, which asks for one).
func confRefreshFollowups(e *Engine) []ami.Message {
	if len(e.confs) == 0 {
		return nil
	}
	return []ami.Message{ami.NewAction(ami.ActionConfbridgeListRooms)}
}
