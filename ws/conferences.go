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

// confMember reports whether u may see room (its JSON data), by
// auth.SeesConference over the members' extenId values.
func confMember(u *auth.User, room string, data []byte) bool {
	return auth.SeesConference(u, room, func(yield func(string) bool) {
		for {
			i := bytes.Index(data, extenIDKey)
			if i < 0 {
				return
			}
			data = data[i+len(extenIDKey):]
			j := bytes.IndexByte(data, '"')
			if j < 0 || !yield(string(data[:j])) {
				return
			}
			data = data[j:]
		}
	})
}
