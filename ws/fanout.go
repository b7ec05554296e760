package ws

import (
	"bytes"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// pump fans out what the feed holds beyond h.last.
func (h *Hub) pump(feed *calls.Feed) {
	if feed.LastSeq() == h.last {
		return
	}
	cs, ok := feed.Since(h.last)
	if !ok {
		// The feed moved more than its whole buffer past us (or was
		// replaced): nobody can be brought up to date by events.
		h.log.Warn("ws hub fell behind the feed: resending snapshots", "last_seq", h.last)
		h.last = feed.LastSeq()
		h.resyncAll("resync")
		return
	}
	if len(cs) == 0 {
		return
	}
	h.fanout(cs)
	h.last = cs[len(cs)-1].Seq
}

// The topics whose changes a client may take as what changed in them
// ("deltas" in its subscribe): a bit each.
const (
	deltaTrunks uint8 = 1 << iota // trunkConversations, not trunkUpdate
	deltaQueues                   // queueMembers, not queueUpdate
	deltaAll    = deltaTrunks | deltaQueues
)

// deltaOf is the delta bit of a change of type typ that says what changed
// (a client not taking it gets the entity whole, ChangeType.Whole), 0 for
// any other.
func deltaOf(typ calls.ChangeType) uint8 {
	switch typ {
	case calls.TrunkConversations:
		return deltaTrunks
	case calls.QueueMembers:
		return deltaQueues
	}
	return 0
}

// entKey names an entity for coalescing.
type entKey struct {
	k   calls.ChangeType // the entity's (ChangeType.Entity)
	key string
}

// prep is one change being fanned out, with its frames made at most once.
type prep struct {
	ch   *calls.Change
	kind calls.ChangeType // ch's entity (ChangeType.Entity)
	// delta is the change's delta bit (deltaOf), read once here rather
	// than per client.
	delta uint8
	ent   uint32
	full  *frame // the change as everyone allowed to see it sees it
	red   *frame // redacted, made on first need
	// whole and wholeRed are a delta change as its entity whole (a
	// trunkUpdate, a queueUpdate), made on first need, for the clients
	// that take no deltas of it.
	whole, wholeRed *frame
	wholeOK         [2]bool
	// pbx is the PBX of ch.Key once pbxOK: split on the first limited
	// client's need, not again for each (seesPBX).
	pbx    string
	pbxOK  bool
	status []statusMemo // pbxStatus frames by PBX set (statusFrame); every prep starts with none
	// unheard: the state said Unheard (LocalState) when it was read for
	// this fan-out or snapshot; a pbxStatus then goes only to the clients
	// taking status deltas, as unheardStatus says it (unheardFrame).
	unheard       bool
	unheardStatus []byte
	unheardF      *frame
}

// prepare readies change ch for a fan-out, a snapshot's gap or a replay
// made with the state's snapshot s (whose Unheard decides what becomes
// of a pbxStatus).
func (h *Hub) prepare(p *prep, ch *calls.Change, at int64, s *calls.Snapshot) {
	p.ch, p.kind, p.red, p.pbxOK, p.unheard = ch, ch.Type.Entity(), nil, false, s.Unheard
	p.unheardStatus, p.unheardF = nil, nil
	if s.Unheard {
		p.unheardStatus = s.StatusJSON()
	}
	p.whole, p.wholeRed, p.wholeOK = nil, nil, [2]bool{}
	p.ent = 0
	if p.kind != calls.ExtenRinging && p.kind != calls.ChangeNone {
		p.ent = h.entID(entKey{p.kind, ch.Key})
	}
	ent := p.ent
	if p.delta = deltaOf(ch.Type); p.delta != 0 {
		ent = 0 // a delta: never replaced by the next one
	}
	p.full = &frame{b: eventFrame(ch, ch.Data), seq: ch.Seq, ent: ent, at: at, msgs: 1}
}

// entID is the coalescing id of entity k.
func (h *Hub) entID(k entKey) uint32 {
	id, ok := h.ents[k]
	if !ok {
		id = uint32(len(h.ents)) + firstEnt // 0: never coalesced; below firstEnt: replies
		h.ents[k] = id
	}
	return id
}

// wholeFrame is delta change p as its entity whole in class cl (a
// trunkUpdate or a queueUpdate: calls.Change.Whole, calls.WholeType), or
// nil when the entity changed since (its newer change follows). The
// entity's bytes are the engine's, made once per class, and not copied:
// the frame is a few bytes around them (eventPieces), and when both
// classes' bytes are the same (nothing on it to hide) both share one
// frame.
func (p *prep) wholeFrame(cl calls.Class) *frame {
	f, other := &p.whole, p.wholeRed
	if cl != calls.Full {
		f, other = &p.wholeRed, p.whole
	}
	if !p.wholeOK[cl] {
		p.wholeOK[cl] = true
		switch data := p.ch.Whole(cl); {
		case data == nil:
		case other != nil && bytes.Equal(other.more[0], data):
			*f = other
		default:
			b, more := eventPieces(p.ch, p.ch.Type.Whole(), data)
			*f = &frame{b: b, more: more, seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
		}
	}
	return *f
}

// wholeFor is wholeFrame in the class of a client that sees the entity's
// numbers or not.
func (p *prep) wholeFor(sees bool) *frame {
	if sees {
		return p.wholeFrame(calls.Full)
	}
	return p.wholeFrame(calls.NumbersHidden)
}

// frameFor is the frame of p that c gets, or nil when c does not get it.
// The filter is auth.View's (the one REST uses): a client gets the
// change's JSON in its class (calls.Change.JSON), so every client that may
// not see an entity's details shares one frame of the NumbersHidden
// bytes. TestFilterMatchesView checks this against the snapshot's bytes
// per class for every kind of user.
func (h *Hub) frameFor(c *conn, p *prep) *frame {
	u := c.user
	if c.pbxLimited() && !seesPBX(c, p) {
		return nil
	}
	var sees bool
	switch p.kind {
	case calls.ExtenUpdate:
		if c.topics&topicExtensions == 0 && (c.topics&topicMe == 0 || !u.Owns(p.ch.Key)) {
			return nil
		}
		sees = c.full || auth.Allowed(u, auth.SeeCalls, p.ch.Key)
	case calls.ExtenRinging:
		// To the owners of the rung extension only; never redacted, as
		// an owner sees its own calls.
		if c.topics&(topicExtensions|topicMe) == 0 || !u.Owns(p.ch.Key) {
			return nil
		}
		return p.full
	case calls.QueueUpdate, calls.QueueMemberUpdate:
		if c.topics&topicQueues == 0 {
			return nil
		}
		sees = c.seesUnowned
		if p.delta != 0 && c.deltas&p.delta == 0 {
			return p.wholeFor(sees)
		}
	case calls.ParkingUpdate:
		if c.topics&topicParkings == 0 {
			return nil
		}
		sees = c.seesUnowned
	case calls.TrunkUpdate:
		if c.topics&topicTrunks == 0 {
			return nil
		}
		sees = c.seesUnowned
		if p.delta != 0 && c.deltas&p.delta == 0 {
			return p.wholeFor(sees)
		}
	case calls.PBXStatus:
		if p.unheard {
			// The feed may move while the node cannot hear its stream
			// (a catch-up), and a link it gives as live is not: the
			// clients taking status deltas get the change as the node
			// says it (stalled), the others nothing (they are sent a
			// snapshot once the node hears again).
			if !c.statusDeltas {
				return nil
			}
			if p.unheardF == nil {
				p.unheardF = &frame{b: eventFrame(p.ch, p.unheardStatus), seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
			}
			return p.unheardF
		}
		if c.pbxLimited() {
			return statusFrame(c, p)
		}
		return p.full
	case calls.UserPresenceUpdate:
		// Opt-in (topic "presence"); presence is never hidden (auth.View).
		if c.topics&topicPresence == 0 {
			return nil
		}
		return p.full
	case calls.ConferenceUpdate:
		if c.topics&(topicExtensions|topicMe) == 0 || !(c.seesUnowned || confMember(u, p.ch)) {
			return nil
		}
		if c.seesUnowned {
			return p.full
		}
		// Members this user may not see are blanked per user (rooms are
		// few and change seldom).
		if data := p.ch.ConferenceJSONFor(auth.ViewOf(u).SeesMember); !bytes.Equal(data, p.ch.Data) {
			return &frame{b: eventFrame(p.ch, data), seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
		}
		return p.full
	default:
		// A change type this hub does not know: only to those who see
		// everything, so nothing leaks.
		if !c.full {
			return nil
		}
		return p.full
	}
	if sees {
		return p.full
	}
	if p.red == nil {
		hid := p.ch.JSON(calls.NumbersHidden)
		if hid == nil {
			return nil // superseded: the entity's newer change follows
		}
		if bytes.Equal(hid, p.ch.Data) {
			p.red = p.full
		} else {
			p.red = &frame{b: eventFrame(p.ch, hid), seq: p.full.seq, ent: p.full.ent, at: p.full.at, msgs: 1} // a delta's ent is 0: never replaced
		}
	}
	return p.red
}

// fanout queues a batch of changes to every subscribed client: one lock
// and at most one wake-up per client per batch, and no allocation per
// client (the frames are shared). The wake-ups are charged to the write
// budget.
func (h *Hub) fanout(cs []calls.Change) {
	at := h.now()
	s := h.state.Snapshot()
	preps := h.preps[:0]
	for i := range cs {
		preps = append(preps, prep{})
		h.prepare(&preps[len(preps)-1], &cs[i], at, s)
	}
	var coalesced uint64
	kicks := 0
	for _, c := range h.clients {
		if !c.subscribed {
			continue
		}
		n := 0
		c.mu.Lock()
		if c.closing != nil {
			c.mu.Unlock()
			continue
		}
		for i := range preps {
			p := &preps[i]
			if p.ch.Seq <= c.base {
				continue // already in the snapshot it was sent
			}
			if f := h.frameFor(c, p); f != nil {
				if c.push(f) {
					coalesced++
				}
				n++
			}
		}
		over := c.live > h.cfg.MaxPending
		if n > 0 && !over {
			h.queue(c)
			kicks++
		}
		c.mu.Unlock()
		if over {
			h.resync(c, "resync")
		}
		if h.writers.n >= dispatchEvery {
			h.writers.dispatch()
		}
	}
	h.writers.dispatch()
	if coalesced > 0 {
		h.m.coalesced.Add(float64(coalesced))
	}
	if h.cfg.WriteRate > 0 {
		h.pace.spend(at, float64(kicks))
	}
	clear(preps)
	h.preps = preps[:0]
}

// pingAll queues a WebSocket ping to every client: it keeps NATs open and
// lets the reader's deadline find dead peers; it drops the parked ones it
// has not heard from in time (park.go).
func (h *Hub) pingAll() {
	now := h.now()
	f := &frame{b: pingBytes, ent: entPing, at: now, kind: frameReply}
	for _, c := range h.clients {
		c.mu.Lock()
		// A parked connection has no read deadline: its silence is
		// checked here (park.go).
		silent := c.parked && now-c.heard > h.silentFor()
		if c.closing == nil && !silent {
			c.push(f)
			h.queue(c)
		}
		c.mu.Unlock()
		if silent {
			c.fail("gone")
		}
		if h.writers.n >= dispatchEvery {
			h.writers.dispatch()
		}
	}
	h.writers.dispatch()
}
