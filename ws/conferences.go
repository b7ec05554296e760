package ws

import (
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// conferenceUpdate goes to the clients subscribed to extensions (or to
// "me") who may see the room: who sees calls no extension owns, the owner
// of the room (named by its extension) and whoever may see one of its
// members' calls. A room that ended arrives with no users.

// confMember reports whether u may see the room of change ch, by
// auth.SeesConference over its members' extenId values.
func confMember(u *auth.User, ch *calls.Change) bool {
	room, ok := ch.Conference()
	if !ok {
		room = &calls.Conference{} // not a room's change: no members
	}
	return auth.SeesConference(u, ch.Key, room.ExtenIDs)
}
