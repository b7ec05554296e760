package pbxsim

import (
	"context"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// ConfBridge as the recordings' dialplan has it: dialling 800 runs
// ConfBridge(1000,default_bridge,default_user) (quiet user profile, no
// announcements, nobody admin or marked). The room exists while someone is
// in it: ConfbridgeStart, ConfbridgeJoin, ConfbridgeLeave, ConfbridgeEnd,
// ConfbridgeMute/Unmute; the AMI actions ConfbridgeListRooms,
// ConfbridgeList, ConfbridgeMute, ConfbridgeUnmute, ConfbridgeKick,
// ConfbridgeLock, ConfbridgeUnlock (confbridge_3_party,
// confbridge_actions). No audio is mixed.

const (
	confNumber = "800"
	confRoom   = "1000"
	confData   = confRoom + ",default_bridge,default_user"
)

// conference is a live ConfBridge room, guarded by PBX.mu.
type conference struct {
	name   string
	br     *bridge
	users  []*confUser
	locked bool
}

type confUser struct {
	ch    *channel
	muted bool
}

// confEvent is a Confbridge* event: the room and its bridge, then the
// channel (if any) and kv. p.mu held.
func confEvent(name string, cf *conference, ch *channel, kv ...string) ami.Message {
	hs := amievent.Head(name, "call,all", 30)
	hs = append(hs, ami.Header{Key: "Conference", Value: cf.name})
	hs = bridgeHeaders(hs, "", cf.br)
	if ch != nil {
		hs = chanHeaders(hs, "", ch)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(hs...)
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

// confBridge runs ConfBridge(1000) for a until a leaves or is kicked.
func (c *call) confBridge(a *channel) (*channel, string) {
	p := c.p
	p.mu.Lock()
	if a.context == "from-trunk" {
		a.context = p.cfg.Context
	}
	a.priority = 3
	a.app, a.appData = "ConfBridge", confData
	a.progressed = true
	c.answer(a, p.sdp(p.chanSeq, false))
	p.stats.Answered++
	cf := p.confs[confRoom]
	if cf != nil && cf.locked {
		// A locked room turns newcomers away.
		p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
		c.sendBye(a, true)
		p.emitCdr(a, confNumber, nil, "ConfBridge", confData, "ANSWERED")
		c.hangupChannel(a, 16, 0)
		p.mu.Unlock()
		return nil, ""
	}
	if cf == nil {
		cf = &conference{name: confRoom, br: &bridge{id: newBridgeID(), typ: "base", tech: "softmix", creator: "ConfBridge", name: confRoom}}
		p.confs[confRoom] = cf
		p.emit(bridgeEvent(ami.EventBridgeCreate, cf.br, nil))
		cf.br.hidden = 1 // the room's announcer channel
		p.emit(confEvent(ami.EventConfbridgeStart, cf, nil))
	}
	c.enter(cf.br, a)
	cf.users = append(cf.users, &confUser{ch: a})
	p.emit(confEvent(ami.EventConfbridgeJoin, cf, a, "Admin", "No", "Muted", "No"))
	p.mu.Unlock()

	max := time.NewTimer(p.cfg.MaxCallDuration)
	defer max.Stop()
	for {
		select {
		case e := <-c.events:
			if e.ch != a {
				continue
			}
			switch e.kind {
			case evBye, evCancel, evNoAck:
				c.confLeave(cf, a, false, false)
				return nil, ""
			case evHangup:
				c.confLeave(cf, a, true, e.cause == confKicked)
				return nil, ""
			}
		case <-max.C:
			c.confLeave(cf, a, true, false)
			return nil, ""
		case <-c.ctx.Done():
			c.confLeave(cf, a, true, false)
			return nil, ""
		}
	}
}

// confKicked marks an evHangup sent by ConfbridgeKick.
const confKicked = -1

// confLeave takes a out of the room: its own hangup (HangupRequest first)
// or ours (a kick: ConfbridgeLeave first); the last one out ends the room.
func (c *call) confLeave(cf *conference, a *channel, bye, kicked bool) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	admin := []string{"Admin", "No"}
	if kicked {
		p.emit(confEvent(ami.EventConfbridgeLeave, cf, a, admin...))
	} else if !bye {
		p.emit(chanEvent(ami.EventHangupRequest, a))
	}
	c.leave(a)
	p.emit(chanEvent(ami.EventSoftHangupRequest, a, "Cause", "16"))
	if !kicked {
		p.emit(confEvent(ami.EventConfbridgeLeave, cf, a, admin...))
	}
	for i, u := range cf.users {
		if u.ch == a {
			cf.users = append(cf.users[:i], cf.users[i+1:]...)
			break
		}
	}
	if len(cf.users) == 0 {
		p.emit(confEvent(ami.EventConfbridgeEnd, cf, nil))
		cf.br.hidden = 0
		p.emit(bridgeEvent(ami.EventBridgeDestroy, cf.br, nil))
		delete(p.confs, cf.name)
	}
	if bye {
		c.sendBye(a, true)
	}
	p.emitCdr(a, confNumber, nil, "ConfBridge", confData, "ANSWERED")
	c.hangupChannel(a, 16, 0)
}

// confUserOf finds a room's participant by channel name. p.mu held.
func (cf *conference) user(name string) *confUser {
	for _, u := range cf.users {
		if u.ch.name == name {
			return u
		}
	}
	return nil
}

func (p *PBX) actConfbridgeListRooms(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.confs) == 0 {
		return errResp("No active conferences.")
	}
	var items []ami.Message
	for _, cf := range p.confs {
		items = append(items, withLeadingID(item(ami.EventConfbridgeListRooms, "Conference", cf.name,
			"Parties", strconv.Itoa(len(cf.users)), "Marked", "0", "Locked", yesNo(cf.locked), "Muted", "No"), req))
	}
	return list(req, "Confbridge conferences will follow", ami.EventConfbridgeListRoomsComplete, items)
}

func (p *PBX) actConfbridgeList(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name := req.Get("Conference")
	if name == "" {
		return errResp("No Conference name provided.")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cf := p.confs[name]
	if cf == nil {
		return errResp("No Conference by that name found.")
	}
	now := p.cfg.Now()
	var items []ami.Message
	for _, u := range cf.users {
		hs := []ami.Header{{Key: "Event", Value: ami.EventConfbridgeList}, {Key: "Conference", Value: cf.name},
			{Key: "Admin", Value: "No"}, {Key: "MarkedUser", Value: "No"}, {Key: "WaitMarked", Value: "No"},
			{Key: "EndMarked", Value: "No"}, {Key: "EndMarkedAny", Value: "No"}, {Key: "Waiting", Value: "No"},
			{Key: "Muted", Value: yesNo(u.muted)}, {Key: "Talking", Value: "No"},
			{Key: "AnsweredTime", Value: strconv.Itoa(int(now.Sub(u.ch.answered) / time.Second))}}
		items = append(items, withLeadingID(ami.NewMessage(chanHeaders(hs, "", u.ch)...), req))
	}
	return list(req, "Confbridge user list will follow", ami.EventConfbridgeListComplete, items)
}

// confTarget checks Conference and Channel and finds the room. p.mu held
// on success.
func (p *PBX) confTarget(req ami.Message, needChannel bool) (*conference, []ami.Message) {
	name := req.Get("Conference")
	if name == "" {
		return nil, errResp("No Conference name provided.")
	}
	if needChannel && req.Get("Channel") == "" {
		return nil, errResp("No channel name provided.")
	}
	p.mu.Lock()
	cf := p.confs[name]
	if cf == nil {
		p.mu.Unlock()
		return nil, errResp("No Conference by that name found.")
	}
	return cf, nil
}

func (p *PBX) actConfbridgeMute(mute bool) ami.HandlerFunc {
	return func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
		cf, bad := p.confTarget(req, true)
		if bad != nil {
			return bad
		}
		defer p.mu.Unlock()
		name := req.Get("Channel")
		var users []*confUser
		if name == "all" || name == "participants" {
			users = cf.users
		} else if u := cf.user(name); u != nil {
			users = []*confUser{u}
		}
		if len(users) == 0 {
			return errResp("No Channel by that name found in Conference.")
		}
		ev, msg := ami.EventConfbridgeUnmute, "User unmuted"
		if mute {
			ev, msg = ami.EventConfbridgeMute, "User muted"
		}
		for _, u := range users {
			if u.muted != mute {
				u.muted = mute
				p.emit(confEvent(ev, cf, u.ch, "Admin", "No"))
			}
		}
		return []ami.Message{resp("Success", "Message", msg)}
	}
}

func (p *PBX) actConfbridgeKick(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	cf, bad := p.confTarget(req, true)
	if bad != nil {
		return bad
	}
	defer p.mu.Unlock()
	u := cf.user(req.Get("Channel"))
	if u == nil {
		return errResp("No Channel by that name found in Conference.")
	}
	u.ch.call.post(callEvent{kind: evHangup, ch: u.ch, cause: confKicked})
	return []ami.Message{resp("Success", "Message", "User kicked")}
}

func (p *PBX) actConfbridgeLock(lock bool) ami.HandlerFunc {
	return func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
		cf, bad := p.confTarget(req, false)
		if bad != nil {
			return bad
		}
		defer p.mu.Unlock()
		cf.locked = lock
		if lock {
			return []ami.Message{resp("Success", "Message", "Conference locked")}
		}
		return []ami.Message{resp("Success", "Message", "Conference unlocked")}
	}
}

func (p *PBX) registerConfBridge() {
	s := p.amiSrv
	s.Handle(ami.ActionConfbridgeListRooms, p.actConfbridgeListRooms)
	s.Handle(ami.ActionConfbridgeList, p.actConfbridgeList)
	s.Handle(ami.ActionConfbridgeMute, p.actConfbridgeMute(true))
	s.Handle(ami.ActionConfbridgeUnmute, p.actConfbridgeMute(false))
	s.Handle(ami.ActionConfbridgeKick, p.actConfbridgeKick)
	s.Handle(ami.ActionConfbridgeLock, p.actConfbridgeLock(true))
	s.Handle(ami.ActionConfbridgeUnlock, p.actConfbridgeLock(false))
}
