package ws

import (
	"bytes"

	"github.com/ctibridge/ctibridge/auth"
)

// conferenceUpdate goes to the clients subscribed to extensions (or to
// "me") who may see the room: who sees calls no extension owns, the owner
// of the room (named by its extension) and whoever may see one of its
// members' calls. A room that ended arrives with no users.

var extenIDKey = []byte(`"extenId":"`)

// confMember reports whether u may see room (its JSON data): the room is
// named by, or has a member on, an extension u may see calls of.
func confMember(u *auth.User, room string, data []byte) bool {
	if auth.Allowed(u, auth.SeeCalls, room) {
		return true
	}
	for {
		i := bytes.Index(data, extenIDKey)
		if i < 0 {
			return false
		}
		data = data[i+len(extenIDKey):]
		j := bytes.IndexByte(data, '"')
		if j < 0 {
			return false
		}
		if auth.Allowed(u, auth.SeeCalls, string(data[:j])) {
			return true
		}
		data = data[j:]
	}
}
