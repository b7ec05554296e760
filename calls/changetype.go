package calls

// ChangeType is what a feed Change is about. Each has one wire name (its
// String), the "type" readers see; code compares the constants, never the
// names.
type ChangeType uint8

// The change types. QueueUpdate and TrunkUpdate are never in the feed:
// they name a delta change's entity whole (Whole), as readers that take
// no deltas get it.
const (
	ChangeNone         ChangeType = iota // the zero Change
	ExtenUpdate                          // an extension, whole (Change.Extension)
	ExtenRinging                         // an extension's channel started ringing (Change.Ringing)
	QueueMembers                         // what changed in a queue (a delta, queuedelta.go)
	QueueUpdate                          // a queue whole: QueueMembers' Whole
	QueueMemberUpdate                    // one queue member (Change.Member)
	ParkingUpdate                        // a parking space, whole
	TrunkConversations                   // what changed in a trunk's calls (a delta, trunkdelta.go)
	TrunkUpdate                          // a trunk whole: TrunkConversations' Whole
	PBXStatus                            // the link to the PBX(s): key "pbx"
	UserPresenceUpdate                   // an extension's presence (Change.Presence)
	ConferenceUpdate                     // a conference room (Change.Conference)
	numChangeTypes
)

var changeNames = [numChangeTypes]string{
	ChangeNone:         "",
	ExtenUpdate:        "extenUpdate",
	ExtenRinging:       "extenRinging",
	QueueMembers:       "queueMembers",
	QueueUpdate:        "queueUpdate",
	QueueMemberUpdate:  "queueMemberUpdate",
	ParkingUpdate:      "parkingUpdate",
	TrunkConversations: "trunkConversations",
	TrunkUpdate:        "trunkUpdate",
	PBXStatus:          "pbxStatus",
	UserPresenceUpdate: "userPresenceUpdate",
	ConferenceUpdate:   "conferenceUpdate",
}

// String is t's wire name ("" for ChangeNone or a type out of range).
func (t ChangeType) String() string {
	if t >= numChangeTypes {
		return ""
	}
	return changeNames[t]
}

// Whole is the type of the change that carries a delta type's entity
// whole (TrunkUpdate for TrunkConversations, QueueUpdate for
// QueueMembers): what a reader that takes no deltas gets instead;
// ChangeNone for a type that is no delta.
func (t ChangeType) Whole() ChangeType {
	switch t {
	case TrunkConversations:
		return TrunkUpdate
	case QueueMembers:
		return QueueUpdate
	}
	return ChangeNone
}

// Entity is the type naming t's entity whole: Whole for a delta, t for
// any other (a queue's changes are one entity's, whichever their type).
func (t ChangeType) Entity() ChangeType {
	if w := t.Whole(); w != ChangeNone {
		return w
	}
	return t
}
