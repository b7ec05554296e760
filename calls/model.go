package calls

// The public model: the entities a Snapshot holds. Every value is immutable
// once published; maps inside them are never written after publication.

// Extension is a phone (PJSIP endpoint) keyed by its number.
type Extension struct {
	Exten         string
	Name          string
	Status        string // online | offline | busy | ringing | busy_ringing | onhold | dnd
	DND           bool
	CF            string
	CFB           string
	CFU           string
	IP            string
	Port          string
	SIPUserAgent  string
	ChanType      string
	Context       string
	Voicemail     *Voicemail              // nil when the PBX reports no mailbox for it
	Conversations map[string]Conversation // by Conversation.ID
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
}

// Conversation is one call leg of an extension or trunk, seen from its owner.
type Conversation struct {
	ID              string // "<caller channel>><callee channel>", either may be empty
	Owner           string // extension number or trunk name
	LinkedID        string // the call's Linkedid, also its JSON's "callId"
	UniqueID        string
	Direction       string // in | out
	CounterpartNum  string
	CounterpartName string
	StartTime       int64 // ms since the epoch: channel created
	AnsweredAt      int64 // ms since the epoch, 0 until connected to its counterpart
	Recording       string
	QueueID         string
	// The flags together: a Conversation is 192 bytes, so a map of them
	// holding one (a group of eight slots) is one size class smaller.
	Connected    bool
	InConference bool
	ThroughQueue bool
	ThroughTrunk bool
	// Voicemail: the call is answered by a mailbox (VoiceMail), the
	// counterpart the mailbox's number.
	Voicemail bool
	// Extra is nil unless the conversation takes part in an attended
	// transfer, is parked, is a spy session or presents a caller ID of
	// its own (an outbound route's): rare, so kept out of line.
	Extra *ConvExtra
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
}

// ConvExtra holds what only some conversations carry; each part is zero
// when it does not apply.
type ConvExtra struct {
	// PresentedNum is the owner's number as the other side sees it on
	// this call, when the PBX presents another than the owner's: the
	// caller ID an outbound route gives a call out (FreePBX's outbound
	// CID, a company DID), JSON "presentedNum".
	PresentedNum string
	Transfer     Transfer
	Parked       Parked
	Spy          Spy
}

// Extras returns c's extra parts, all zero when it has none.
func (c *Conversation) Extras() ConvExtra {
	if c.Extra == nil {
		return ConvExtra{}
	}
	return *c.Extra
}

// convEqual compares two conversations, their extra parts by value.
func convEqual(a, b Conversation) bool {
	ea, eb := a.Extra, b.Extra
	a.Extra, b.Extra = nil, nil
	if a != b || (ea == nil) != (eb == nil) {
		return false
	}
	return ea == nil || *ea == *eb
}

// Duration is the talk time in whole seconds at nowMs (0 if not answered).
func (c Conversation) Duration(nowMs int64) int64 { return durationAt(c.AnsweredAt, nowMs) }

// durationAt is the talk time in whole seconds at nowMs of a call
// answered at answeredAt (0: not answered).
func durationAt(answeredAt, nowMs int64) int64 {
	if answeredAt == 0 || nowMs < answeredAt {
		return 0
	}
	return (nowMs - answeredAt) / 1000
}

// Queue is an Asterisk app_queue queue keyed by its name.
type Queue struct {
	Queue          string
	Name           string
	Number         string                  // the number dialled to reach it, "" until learnt or when it is Queue
	Members        map[string]*QueueMember // by extension number; shared by the snapshots, never written
	WaitingCallers map[string]*QueueCaller // by channel name; likewise
	Completed      int
	Abandoned      int
	HoldTime       int // seconds, Asterisk's running average
	TalkTime       int // seconds, Asterisk's running average
	// ServiceLevel is the queue's service level in seconds (queues.conf
	// servicelevel, from QueueStatus; 0 until listed); CompletedInSL the
	// completed calls answered within it, AbandonedInSL the abandoned
	// ones that gave up within it, as app_queue counts them (its
	// ServicelevelPerf is CompletedInSL/Completed, ServicelevelPerf2
	// (AbandonedInSL+CompletedInSL)/(Abandoned+Completed)).
	ServiceLevel  int
	CompletedInSL int
	AbandonedInSL int
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
	// pieces is the members' JSON the engine keeps (queuepieces.go),
	// used while it holds exactly Members.
	pieces *memberPieces
}

// QueueMember is an agent of a queue.
type QueueMember struct {
	Queue        string // the queue it belongs to (not in the member JSON)
	Member       string
	Name         string
	Type         string // static | dynamic
	Paused       bool
	PausedReason string
	LoggedIn     bool
	CallsTaken   int
	LastCall     int64 // ms since the epoch, 0 if never
	// LastPause is when its latest pause began (app_queue's LastPause),
	// ms since the epoch, 0 if never paused: while Paused, paused since.
	LastPause int64
	// LoginTime is when it became a member (app_queue's LoginTime: a
	// dynamic member's QueueAdd, a static one's queue load), ms since the
	// epoch, 0 when the PBX did not say.
	LoginTime int64
}

// QueueCaller is a caller waiting in a queue.
type QueueCaller struct {
	Channel      string
	Num          string
	Name         string
	Position     int
	WaitingSince int64 // ms since the epoch
}

// Parking is one parking space keyed by its number ("701").
type Parking struct {
	Parking      string
	Name         string
	Timeout      int // seconds
	ParkedCaller *ParkedCaller
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
}

// ParkedCaller is who waits in a parking space.
type ParkedCaller struct {
	Channel  string
	Num      string
	Name     string
	ParkedAt int64 // ms since the epoch
	ParkedBy string
}

// Trunk is a provider endpoint keyed by its name.
type Trunk struct {
	Name          string
	Status        string // online | offline | busy | unmonitored
	Registration  string // registered | unregistered | rejected | unmonitored
	ChanType      string
	Conversations ConvMap // by id (convmap.go)
	// PBX names the PBX of a named site (Multi); "" for the default PBX,
	// whose JSON has no "pbx" key.
	PBX string
}

func convsEqual(a, b map[string]Conversation) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !convEqual(w, v) {
			return false
		}
	}
	return true
}

func extEqual(a, b *Extension) bool {
	return extFieldsEqual(a, b) && convsEqual(a.Conversations, b.Conversations)
}

// extFieldsEqual compares all but the conversations.
func extFieldsEqual(a, b *Extension) bool {
	return a.Exten == b.Exten && a.Name == b.Name && a.Status == b.Status && a.DND == b.DND &&
		a.CF == b.CF && a.CFB == b.CFB && a.CFU == b.CFU && a.IP == b.IP && a.Port == b.Port &&
		a.SIPUserAgent == b.SIPUserAgent && a.ChanType == b.ChanType && a.Context == b.Context &&
		(a.Voicemail == b.Voicemail || (a.Voicemail != nil && b.Voicemail != nil && *a.Voicemail == *b.Voicemail))
}

func trunkEqual(a, b *Trunk) bool {
	return trunkFieldsEqual(a, b) && a.Conversations.equal(b.Conversations)
}

// trunkFieldsEqual compares all but the conversations.
func trunkFieldsEqual(a, b *Trunk) bool {
	return a.Name == b.Name && a.Status == b.Status && a.Registration == b.Registration && a.ChanType == b.ChanType
}

func parkingEqual(a, b *Parking) bool {
	if a.Parking != b.Parking || a.Name != b.Name || a.Timeout != b.Timeout {
		return false
	}
	if (a.ParkedCaller == nil) != (b.ParkedCaller == nil) {
		return false
	}
	return a.ParkedCaller == nil || *a.ParkedCaller == *b.ParkedCaller
}
