package rest

import (
	"maps"
	"net/http"
	"slices"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Conferences (ConfBridge). A user's own conference is the room named by
// its extension number ("my conference", as in NethCTI); any room can be
// read by who may see it and managed by who holds auth.Conference on the
// room's name (admins, and operators for their groups' extensions).
// Members join through Originate into the ConfBridge application, so no
// dialplan is assumed; mute, unmute and kick are ConfbridgeMute,
// ConfbridgeUnmute and ConfbridgeKick on the member's channel.

// confSees reports whether u may see room c: who sees calls no extension
// owns, the room's owner, and who may see one of its members' calls.
func confSees(u *auth.User, c *calls.Conference) bool {
	return auth.SeesConference(u, c.ID, c.ExtenIDs)
}

// getConferences answers the rooms u may see (every PBX: reads of some
// PBXs are byPBX's), cached per version as those are.
func (h *handler) getConferences(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	return h.writePBXs(w, r, resConferences, pbxRead{only: "*", u: u})
}

// conferencesJSON is {"<room>":{...},...}, the rooms u may see that keep
// keeps, their members as u may see them.
func conferencesJSON(s *calls.Snapshot, u *auth.User, keep func(string) bool) []byte {
	if auth.ViewOf(u).Full() && !u.PBXLimited() && keep == nil {
		return s.ConferencesJSON()
	}
	return jsonObject(slices.Sorted(maps.Keys(s.Conferences)), func(k string) []byte {
		c := s.Conferences[k]
		if !confSees(u, &c) || keep != nil && !keep(k) {
			return nil
		}
		return s.ConferenceJSONFor(k, auth.ViewOf(u).SeesMember)
	})
}

func (h *handler) getConference(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	vc := h.current()
	id := r.PathValue("endpoint")
	c, ok := vc.snap.Conferences[id]
	if !ok || !confSees(u, &c) {
		// Not visible is answered as absent: the room's existence is a
		// call detail too.
		return writeError(w, h.log, r, notFound("conference %q does not exist", id))
	}
	e := newEntry(vc.snap.ConferenceJSONFor(id, auth.ViewOf(u).SeesMember))
	e.covers, e.stale = true, h.pbxStale(vc.snap, id)
	return h.write(w, r, vc, e)
}

type confOwnerReq struct {
	EndpointID    string `json:"endpointId"`
	AddEndpointID string `json:"addEndpointId"`
}

type confUserReq struct {
	ConfID string `json:"confId"`
	UserID string `json:"userId"`
}

type confLockReq struct {
	ConfID string `json:"confId"`
	Lock   *bool  `json:"lock"`
}

var confActions = []action{
	act("start_conf", planStartConf),
	act("join_myconf", planJoinMyConf),
	act("end_conf", planEndConf),
	act("mute_userconf", planConfUser(ami.ActionConfbridgeMute)),
	act("unmute_userconf", planConfUser(ami.ActionConfbridgeUnmute)),
	act("hangup_userconf", planConfUser(ami.ActionConfbridgeKick)),
	act("lock_conf", planLockConf),
}

// confRoom checks that u may manage room id (a number, as it becomes an
// AMI header) and returns the room, ok=false when nobody is in it.
func (h *handler) confRoom(u *auth.User, s *calls.Snapshot, field, id string) (calls.Conference, bool, error) {
	if err := h.checkNumber(field, id); err != nil {
		return calls.Conference{}, false, err
	}
	if !auth.Allowed(u, auth.Conference, id) {
		return calls.Conference{}, false, forbidden("%s may not manage conference %s", u.Username, id)
	}
	c, ok := s.Conferences[id]
	return c, ok, nil
}

// intoConf rings phone exten and, once answered, puts it into room.
func (h *handler) intoConf(exten, room string) ami.Message {
	return ami.NewAction(ami.ActionOriginate,
		"Channel", h.dev(exten), "Application", "ConfBridge", "Data", room,
		"CallerID", room, "Account", room, "Timeout", "30000", "Async", "true")
}

func member(c calls.Conference, exten string) bool {
	for _, m := range c.Users {
		if m.ExtenID == exten {
			return true
		}
	}
	return false
}

// planStartConf adds addEndpointId to the caller's own conference (the
// room named endpointId), bringing the owner in first when absent.
func planStartConf(h *handler, u *auth.User, s *calls.Snapshot, req *confOwnerReq) ([]ami.Message, error) {
	id, err := ownEndpoint(u, req.EndpointID)
	if err != nil {
		return nil, err
	}
	if _, err := h.endpoint(u, s, auth.Conference, "endpointId", id); err != nil {
		return nil, err
	}
	if err := h.checkNumber("addEndpointId", req.AddEndpointID); err != nil {
		return nil, err
	}
	if req.AddEndpointID == id {
		return nil, badRequest("addEndpointId is the conference's owner: use join_myconf")
	}
	if _, ok := s.Extensions.Lookup(req.AddEndpointID); !ok {
		return nil, notFound("extension %q does not exist", req.AddEndpointID)
	}
	c, _, err := h.confRoom(u, s, "endpointId", id)
	if err != nil {
		return nil, err
	}
	if member(c, req.AddEndpointID) {
		return nil, conflict("%s is already in conference %s", req.AddEndpointID, id)
	}
	var msgs []ami.Message
	if !member(c, id) {
		msgs = append(msgs, h.intoConf(id, id))
	}
	return append(msgs, h.intoConf(req.AddEndpointID, id)), nil
}

func planJoinMyConf(h *handler, u *auth.User, s *calls.Snapshot, req *confOwnerReq) ([]ami.Message, error) {
	id, err := ownEndpoint(u, req.EndpointID)
	if err != nil {
		return nil, err
	}
	if req.AddEndpointID != "" {
		return nil, badRequest("addEndpointId belongs to start_conf")
	}
	if _, err := h.endpoint(u, s, auth.Conference, "endpointId", id); err != nil {
		return nil, err
	}
	c, _, err := h.confRoom(u, s, "endpointId", id)
	if err != nil {
		return nil, err
	}
	if member(c, id) {
		return nil, conflict("%s is already in its conference", id)
	}
	return []ami.Message{h.intoConf(id, id)}, nil
}

// planEndConf kicks every member: ConfBridge ends the room with the last.
func planEndConf(h *handler, u *auth.User, s *calls.Snapshot, req *confOwnerReq) ([]ami.Message, error) {
	id, err := ownEndpoint(u, req.EndpointID)
	if err != nil {
		return nil, err
	}
	if req.AddEndpointID != "" {
		return nil, badRequest("addEndpointId belongs to start_conf")
	}
	_, ok, err := h.confRoom(u, s, "endpointId", id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("conference %q does not exist", id)
	}
	return []ami.Message{ami.NewAction(ami.ActionConfbridgeKick, "Conference", id, "Channel", "all")}, nil
}

func planConfUser(name string) func(h *handler, u *auth.User, s *calls.Snapshot, req *confUserReq) ([]ami.Message, error) {
	return func(h *handler, u *auth.User, s *calls.Snapshot, req *confUserReq) ([]ami.Message, error) {
		c, ok, err := h.confRoom(u, s, "confId", req.ConfID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, notFound("conference %q does not exist", req.ConfID)
		}
		m, ok := c.Users[req.UserID]
		if !ok {
			return nil, notFound("conference %s has no user %q", req.ConfID, req.UserID)
		}
		switch {
		case name == ami.ActionConfbridgeMute && m.Muted:
			return nil, conflict("user %s is already muted", req.UserID)
		case name == ami.ActionConfbridgeUnmute && !m.Muted:
			return nil, conflict("user %s is not muted", req.UserID)
		}
		return []ami.Message{ami.NewAction(name, "Conference", req.ConfID, "Channel", m.Channel)}, nil
	}
}

// planLockConf locks ({"lock":true}) or unlocks a room. Asterisk sends no
// event for it: the room's "locked" follows at the next room list.
func planLockConf(h *handler, u *auth.User, s *calls.Snapshot, req *confLockReq) ([]ami.Message, error) {
	if req.Lock == nil {
		return nil, badRequest("lock (true or false) is required")
	}
	_, ok, err := h.confRoom(u, s, "confId", req.ConfID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("conference %q does not exist", req.ConfID)
	}
	name := ami.ActionConfbridgeUnlock
	if *req.Lock {
		name = ami.ActionConfbridgeLock
	}
	return []ami.Message{ami.NewAction(name, "Conference", req.ConfID)}, nil
}
