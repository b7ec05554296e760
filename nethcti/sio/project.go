package sio

import (
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/nethcti/shape"
)

// projector is what the fan-out remembers of the state, to tell what the
// feed's changes do not say themselves: a conversation that ended
// (extenHangup) or was answered (extenConnected), a user's main presence
// that changed, a mailbox's new count, the clients told of a room.
type projector struct {
	dir  Directory
	last uint64 // the feed's seq projected
	exts map[string]extMemo
	pres map[string]string // username -> main presence last told
	// rooms: the clients told of each conference in use, who are told
	// when it ends.
	rooms map[string]map[*client]struct{}
}

// extMemo is what an extension's last change said.
type extMemo struct {
	// convs: the conversations by the Uniqueid of the owner's channel
	// (an outgoing one's id changes when the callee's channel appears),
	// whether connected.
	convs map[string]bool
	vm    int // new voicemail messages, -1: no mailbox
}

func (p *projector) init(dir Directory) { p.dir = dir }

// reset takes s as what the clients know: no event for what it holds.
func (p *projector) reset(s *calls.Snapshot) {
	p.last = s.Seq
	p.exts = make(map[string]extMemo, s.Extensions.Len())
	p.pres = map[string]string{}
	p.rooms = map[string]map[*client]struct{}{}
	for k, x := range s.Extensions.All() {
		m := extMemo{convs: make(map[string]bool, len(x.Conversations)), vm: -1}
		for id, c := range x.Conversations {
			m.convs[convKey(id, c.UniqueID)] = c.Connected
		}
		if x.Voicemail != nil {
			m.vm = x.Voicemail.New
		}
		p.exts[k] = m
		if u, ok := p.dir.UserOf(k); ok && mainOf(u) == k {
			p.pres[u.Username] = calls.MainPresenceOf(&x, u.Cellphone)
		}
	}
}

// mainOf is a user's main extension: its first.
func mainOf(u *auth.User) string {
	if len(u.Endpoints) == 0 {
		return ""
	}
	return u.Endpoints[0]
}

// pump projects what the feed holds beyond the last change projected.
func (s *Server) pump(feed *calls.Feed) {
	p := &s.proj
	if feed.LastSeq() == p.last {
		return
	}
	cs, ok := feed.Since(p.last)
	if !ok {
		// The feed moved a whole buffer past us, or was replaced: what
		// the clients hold may be stale. NethCTI's serverReloaded has
		// them read everything again.
		s.log.Warn("sio: fell behind the feed: telling every client serverReloaded", "last_seq", p.last)
		p.reset(s.state.Snapshot())
		pk := newPacket("serverReloaded", nil)
		for _, c := range *s.list.Load() {
			if c.view.Load() != nil {
				c.write(pk)
			}
		}
		return
	}
	for i := range cs {
		s.change(&cs[i])
	}
	if len(cs) > 0 {
		p.last = cs[len(cs)-1].Seq
	}
}

// change projects one change of the feed to the clients logged in.
func (s *Server) change(ch *calls.Change) {
	cl := *s.list.Load()
	switch ch.Type {
	case calls.ExtenUpdate:
		s.extension(ch, cl)
	case calls.QueueMembers:
		// NethCTI's clients take a queue whole.
		s.unowned(ch, cl, calls.QueueUpdate, s.shaped(ch, ch.Whole, shape.Queue))
	case calls.QueueUpdate:
		s.unowned(ch, cl, ch.Type, s.shaped(ch, ch.JSON, shape.Queue))
	case calls.QueueMemberUpdate:
		s.unowned(ch, cl, ch.Type, s.shaped(ch, ch.JSON, func(m map[string]any) { shape.Member(m, "") }))
	case calls.ParkingUpdate:
		now := s.now().Unix()
		s.unowned(ch, cl, ch.Type, s.shaped(ch, ch.JSON, func(p map[string]any) { shape.Parking(p, now) }))
	case calls.ConferenceUpdate:
		s.conference(ch, cl)
	}
}

// shaped is data in NethCTI's shape (package shape: the REST front's
// reads' too), made once per class by classed; nil, with a warning, for
// JSON that is not an object.
func (s *Server) shaped(ch *calls.Change, data func(calls.Class) []byte, f func(map[string]any)) func(calls.Class) []byte {
	return func(cl calls.Class) []byte {
		b := data(cl)
		if b == nil {
			return nil
		}
		out, err := shape.Object(b, f)
		if err != nil {
			s.log.Warn("sio: a change's JSON", "type", ch.Type, "key", ch.Key, "err", err)
			return nil
		}
		return out
	}
}

// view is what a logged-in client may see: set at its login, read by the
// fan-out without a lock.
type view struct {
	user    *auth.User
	uaType  string
	full    bool // hides nothing (auth.View.Full)
	unowned bool // sees the calls no extension owns in full
}

func newView(u *auth.User, ua string) *view {
	return &view{user: u, uaType: ua, full: auth.ViewOf(u).Full(), unowned: auth.Allowed(u, auth.SeeCalls, "")}
}

// gets reports whether v gets the entity of id at all: a user limited to
// some PBXs gets only theirs.
func (v *view) gets(id string) bool { return !v.user.PBXLimited() || v.user.SeesID(id) }

// classed is a change's packets per class, made on first need; nil when
// the change has no bytes in that class (its entity changed since: the
// newer change follows).
type classed struct {
	name string
	data func(calls.Class) []byte
	pk   [2]*packet
	made [2]bool
}

func (k *classed) get(cl calls.Class) *packet {
	if !k.made[cl] {
		k.made[cl] = true
		if d := k.data(cl); d != nil {
			k.pk[cl] = newPacket(k.name, d)
		}
	}
	return k.pk[cl]
}

// unowned sends a queue's, a member's or a parking's change: the calls in
// it are no extension's, so a client sees them in full when it sees
// unowned calls (as /ws decides it).
func (s *Server) unowned(ch *calls.Change, cl []*client, typ calls.ChangeType, data func(calls.Class) []byte) {
	k := classed{name: typ.String(), data: data}
	for _, c := range cl {
		v := c.view.Load()
		if v == nil || !v.gets(ch.Key) {
			continue
		}
		cls := calls.NumbersHidden
		if v.unowned {
			cls = calls.Full
		}
		if pk := k.get(cls); pk != nil {
			c.write(pk)
		}
	}
}

// extension sends an extension's change in NethCTI's shape to every
// client, in its class (the calls of an extension the user may not see
// have their numbers hidden, as on /ws), and what it implies: to the
// extension's owners extenHangup for each conversation that ended
// (before the update that drops it: phone-island reads the conversation
// then) and extenConnected for each one answered; to every client the
// main presence of the user whose main extension it is when that changed,
// and the mailbox's new count when that changed.
func (s *Server) extension(ch *calls.Change, cl []*client) {
	p := &s.proj
	x, ok := ch.Extension()
	if !ok {
		s.log.Warn("sio: an extension's change without its extension", "exten", ch.Key)
		return
	}
	was, known := p.exts[ch.Key]
	now := extMemo{convs: make(map[string]bool, len(x.Conversations)), vm: -1}
	for id, c := range x.Conversations {
		now.convs[convKey(id, c.UniqueID)] = c.Connected
	}
	if x.Voicemail != nil {
		now.vm = x.Voicemail.New
	}
	p.exts[ch.Key] = now
	u, _ := p.dir.UserOf(ch.Key)
	username := ""
	if u != nil {
		username = u.Username
	}

	for id := range was.convs {
		if _, ok := now.convs[id]; !ok {
			s.toOwners(cl, ch.Key, newPacket("extenHangup", hangupJSON(ch.Key, causeOf(ch.Hangups(), id))))
		}
	}
	k := classed{name: calls.ExtenUpdate.String(), data: func(cls calls.Class) []byte {
		d := ch.JSON(cls)
		if d == nil {
			return nil
		}
		b, err := nethctiExtension(d, username)
		if err != nil {
			s.log.Warn("sio: an extension's JSON", "exten", ch.Key, "err", err)
			return nil
		}
		return b
	}}
	for _, c := range cl {
		v := c.view.Load()
		if v == nil || !v.gets(ch.Key) {
			continue
		}
		cls := calls.NumbersHidden
		if v.full || auth.Allowed(v.user, auth.SeeCalls, ch.Key) {
			cls = calls.Full
		}
		if pk := k.get(cls); pk != nil {
			c.write(pk)
		}
	}
	for id, conn := range now.convs {
		if conn && !was.convs[id] {
			s.toOwners(cl, ch.Key, newPacket("extenConnected", connectedJSON(ch.Key)))
		}
	}
	if u != nil && mainOf(u) == ch.Key {
		st := calls.MainPresenceOf(x, u.Cellphone)
		if p.pres[username] != st {
			p.pres[username] = st
			s.toAll(cl, ch.Key, newPacket("userMainPresenceUpdate", mainPresenceJSON(username, st)))
		}
	}
	if known && now.vm >= 0 && now.vm != was.vm {
		s.toAll(cl, ch.Key, newPacket("newVoiceMessageCounter", voicemailJSON(ch.Key, now.vm)))
	}
}

// toOwners sends pk to the clients of the users who own exten.
func (s *Server) toOwners(cl []*client, exten string, pk *packet) {
	for _, c := range cl {
		if v := c.view.Load(); v != nil && v.user.Owns(exten) && v.gets(exten) {
			c.write(pk)
		}
	}
}

// toAll sends pk, about the entity of id, to every client that gets it.
func (s *Server) toAll(cl []*client, id string, pk *packet) {
	for _, c := range cl {
		if v := c.view.Load(); v != nil && v.gets(id) {
			c.write(pk)
		}
	}
}

// conference sends a room's change as /ws filters it: to the clients who
// see unowned calls, and to those with a member on one of their
// extensions, the others' members blanked; when the room ends,
// confBridgeEnd to the clients told of it.
func (s *Server) conference(ch *calls.Change, cl []*client) {
	p := &s.proj
	room, ok := ch.Conference()
	if !ok {
		return
	}
	if len(room.Users) == 0 {
		told := p.rooms[ch.Key]
		delete(p.rooms, ch.Key)
		pk := newPacket("confBridgeEnd", confEndJSON(ch.Key))
		for _, c := range cl {
			if _, ok := told[c]; ok {
				c.write(pk)
			}
		}
		return
	}
	told := p.rooms[ch.Key]
	if told == nil {
		told = map[*client]struct{}{}
		p.rooms[ch.Key] = told
	}
	var full *packet
	for _, c := range cl {
		v := c.view.Load()
		if v == nil || !v.gets(ch.Key) || !(v.unowned || auth.SeesConference(v.user, ch.Key, room.ExtenIDs)) {
			continue
		}
		if full == nil {
			full = newPacket("confBridgeUpdate", ch.Data)
		}
		pk := full
		if !v.unowned {
			if d := ch.ConferenceJSONFor(auth.ViewOf(v.user).SeesMember); string(d) != string(ch.Data) {
				pk = newPacket("confBridgeUpdate", d)
			}
		}
		told[c] = struct{}{}
		c.write(pk)
	}
}

// convKey names a conversation across its changes: its owner's channel.
func convKey(id, uniqueID string) string {
	if uniqueID != "" {
		return uniqueID
	}
	return id
}
