package calls

import (
	"cmp"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Hand-written encoders: the key order and names are docs/design.md's ("JSON
// shapes"), numbers are
// JSON numbers, map keys are sorted so the output is deterministic, and no
// reflection runs on the publish path.

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string, as every JSON the engine
// writes does: the one string encoder of REST's and the WebSocket's
// hand-written JSON too.
func AppendJSONString(b []byte, s string) []byte { return appendString(b, s) }

// appendString appends s as a JSON string, escaping like encoding/json
// (control characters, quote, backslash, U+2028/U+2029, invalid UTF-8 as
// U+FFFD) minus its HTML escaping.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	if n := len(s); n >= 4 && n < 8 && plain8(uint64(le32(s))|uint64(le32(s[n-4:]))<<32) {
		return append(append(b, s...), '"') // short and plain: its two words, overlapping, checked at once
	}
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			if plain8(le64(s[i:])) {
				i += 8
				continue
			}
		} else if len(s) >= 8 && plain8(le64(s[len(s)-8:])) {
			break // the last word, overlapping bytes done, is plain: so is the rest
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plain8 reports whether the 8 bytes of w (le64) are ASCII that a JSON
// string holds as it is, all at once, by the high bit of each byte of
// w-0x20 (set for a control character, and for 0xa0 or more), of
// (w^'"')-1 (a quote, and 0x80 to 0xa1 or 0xa3 or more) and of (w^'\\')-1
// (a backslash): every other byte leaves all three clear. A subtraction
// borrows from the next byte only for a byte already flagged, so the test
// is exact.
func plain8(w uint64) bool {
	const ones = 0x0101010101010101
	return ((w-0x20*ones)|((w^'"'*ones)-ones)|((w^'\\'*ones)-ones))&(0x80*ones) == 0
}

// le64 is s's first 8 bytes as one little-endian word (one load).
func le64(s string) uint64 {
	_ = s[7] // one bounds check
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// le32 is s's first 4 bytes as one little-endian word.
func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func appendKey(b []byte, k string) []byte {
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendStrField(b []byte, k, v string) []byte {
	return appendString(appendKey(b, k), v)
}

func appendBoolField(b []byte, k string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, k), v)
}

func appendIntField(b []byte, k string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, k), v, 10)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendConversation(b []byte, c *Conversation, nowMs int64, e enc) []byte {
	b = strconv.AppendInt(appendConvHead(b, c, e), c.Duration(nowMs), 10)
	return appendConvTail(b, c, e)
}

// appendConvHead writes a conversation up to its duration's value, and
// appendConvTail what follows it: a trunk keeps each conversation's JSON
// in these two parts (convmap.go).
func appendConvHead(b []byte, c *Conversation, e enc) []byte {
	b = append(b, '{')
	b = e.convID(appendKey(b, "id"), c.ID)
	b = append(b, ',')
	b = appendStrField(b, "callId", c.LinkedID)
	b = append(b, ',')
	b = appendStrField(b, "owner", c.Owner)
	b = append(b, ',')
	b = appendStrField(b, "linkedId", c.LinkedID)
	b = append(b, ',')
	b = appendStrField(b, "uniqueId", c.UniqueID)
	b = append(b, ',')
	b = appendBoolField(b, "connected", c.Connected)
	b = append(b, ',')
	b = appendStrField(b, "direction", c.Direction)
	b = append(b, ',')
	b = e.secret(appendKey(b, "counterpartNum"), c.CounterpartNum)
	b = append(b, ',')
	b = e.secret(appendKey(b, "counterpartName"), c.CounterpartName)
	b = append(b, ',')
	b = appendIntField(b, "startTime", c.StartTime)
	b = append(b, ',')
	b = appendIntField(b, "answeredAt", c.AnsweredAt)
	b = append(b, ',')
	return appendKey(b, "duration")
}

func appendConvTail(b []byte, c *Conversation, e enc) []byte {
	b = append(b, ',')
	b = appendStrField(b, "recording", c.Recording)
	b = append(b, ',')
	b = appendBoolField(b, "inConference", c.InConference)
	b = append(b, ',')
	b = appendBoolField(b, "throughQueue", c.ThroughQueue)
	b = append(b, ',')
	b = appendStrField(b, "queueId", c.QueueID)
	b = append(b, ',')
	b = appendBoolField(b, "throughTrunk", c.ThroughTrunk)
	if c.Voicemail {
		b = append(b, `,"voicemail":true`...)
	}
	return append(appendPBX(appendConvExtras(b, c, e), c.PBX), '}')
}

// appendConvExtras writes the optional parts of a conversation, each
// only when it applies: "presentedNum", "transfer", "parked", "spy".
func appendConvExtras(b []byte, c *Conversation, e enc) []byte {
	x := c.Extra
	if x == nil {
		return b
	}
	if x.PresentedNum != "" {
		b = append(b, ',')
		b = appendStrField(b, "presentedNum", x.PresentedNum)
	}
	if t := &x.Transfer; t.ID != "" {
		b = append(b, `,"transfer":{`...)
		b = appendStrField(b, "id", t.ID)
		b = append(b, ',')
		b = appendStrField(b, "state", t.State)
		b = append(b, ',')
		b = appendStrField(b, "role", t.Role)
		b = append(b, '}')
	}
	if p := &x.Parked; p.Parking != "" {
		b = append(b, `,"parked":{`...)
		b = appendStrField(b, "parking", p.Parking)
		b = append(b, ',')
		b = e.secret(appendKey(b, "by"), p.By)
		b = append(b, ',')
		b = appendIntField(b, "timeout", int64(p.Timeout))
		b = append(b, '}')
	}
	if s := &x.Spy; s.Mode != "" {
		b = append(b, `,"spy":{`...)
		b = e.secret(appendKey(b, "exten"), s.Exten)
		b = append(b, ',')
		b = appendStrField(b, "mode", s.Mode)
		b = append(b, '}')
	}
	return b
}

// appendConversations writes the conversations object, by id. An
// extension has a few: their ids are sorted in a buffer on the stack, and
// one is written as it is ranged over.
func appendConversations(b []byte, m map[string]Conversation, nowMs int64, e enc) []byte {
	b = append(b, '{')
	if len(m) == 1 {
		for k, c := range m {
			b = appendConvEntry(b, k, &c, nowMs, e)
		}
		return append(b, '}')
	}
	var few [8]string
	keys := few[:0]
	if len(m) > len(few) {
		keys = make([]string, 0, len(m))
	}
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		c := m[k]
		b = appendConvEntry(b, k, &c, nowMs, e)
	}
	return append(b, '}')
}

// appendConvEntry writes one member of the conversations object: its id,
// then the conversation.
func appendConvEntry(b []byte, id string, c *Conversation, nowMs int64, e enc) []byte {
	b = e.convID(b, id)
	b = append(b, ':')
	return appendConversation(b, c, nowMs, e)
}

func appendExtension(b []byte, x *Extension, nowMs int64, e enc) []byte {
	b = append(b, '{')
	b = appendStrField(b, "exten", x.Exten)
	b = append(b, ',')
	b = appendStrField(b, "name", x.Name)
	b = append(b, ',')
	b = appendStrField(b, "status", x.Status)
	b = append(b, ',')
	b = appendBoolField(b, "dnd", x.DND)
	b = append(b, ',')
	b = appendStrField(b, "cf", x.CF)
	b = append(b, ',')
	b = appendStrField(b, "cfb", x.CFB)
	b = append(b, ',')
	b = appendStrField(b, "cfu", x.CFU)
	b = append(b, ',')
	b = appendStrField(b, "ip", x.IP)
	b = append(b, ',')
	b = appendStrField(b, "port", x.Port)
	b = append(b, ',')
	b = appendStrField(b, "sipuseragent", x.SIPUserAgent)
	b = append(b, ',')
	b = appendStrField(b, "chanType", x.ChanType)
	b = append(b, ',')
	b = appendStrField(b, "context", x.Context)
	b = append(b, ',')
	if v := x.Voicemail; v != nil {
		b = appendKey(b, "voicemail")
		b = append(b, '{')
		b = appendIntField(b, "new", int64(v.New))
		b = append(b, ',')
		b = appendIntField(b, "old", int64(v.Old))
		b = append(b, '}', ',')
	}
	b = appendConversations(appendKey(b, "conversations"), x.Conversations, nowMs, e)
	return append(appendPBX(b, x.PBX), '}')
}

// appendTrunk writes a trunk, its conversations from their pieces
// (convmap.go: the bytes appendConversations would write).
func appendTrunk(b []byte, t *Trunk, nowMs int64, e enc) []byte {
	c := classOf(e)
	b = slices.Grow(b, 256+t.Conversations.jsonSize(c, e.op)) // a trunk's JSON is large: growing it copies it
	b = t.Conversations.appendJSON(appendKey(appendTrunkHead(b, t), "conversations"), c, e.op, nowMs)
	return append(appendPBX(b, t.PBX), '}')
}

func classOf(e enc) Class {
	if e.hide {
		return NumbersHidden
	}
	return Full
}

// appendTrunkHead writes a trunk's fields before its conversations.
func appendTrunkHead(b []byte, t *Trunk) []byte {
	b = append(b, '{')
	b = appendStrField(b, "name", t.Name)
	b = append(b, ',')
	b = appendStrField(b, "status", t.Status)
	b = append(b, ',')
	b = appendStrField(b, "registration", t.Registration)
	b = append(b, ',')
	b = appendStrField(b, "chanType", t.ChanType)
	return append(b, ',')
}

func appendMemberFields(b []byte, m *QueueMember) []byte {
	b = appendStrField(b, "member", m.Member)
	b = append(b, ',')
	b = appendStrField(b, "name", m.Name)
	b = append(b, ',')
	b = appendStrField(b, "type", m.Type)
	b = append(b, ',')
	b = appendBoolField(b, "paused", m.Paused)
	b = append(b, ',')
	b = appendStrField(b, "pausedReason", m.PausedReason)
	b = append(b, ',')
	b = appendBoolField(b, "loggedIn", m.LoggedIn)
	b = append(b, ',')
	b = appendIntField(b, "callsTaken", int64(m.CallsTaken))
	b = append(b, ',')
	b = appendIntField(b, "lastCall", m.LastCall)
	b = append(b, ',')
	b = appendIntField(b, "lastPause", m.LastPause)
	b = append(b, ',')
	return appendIntField(b, "loginTime", m.LoginTime)
}

// appendMember is the member as it appears inside its queue.
func appendMember(b []byte, m *QueueMember) []byte {
	b = append(b, '{')
	b = appendMemberFields(b, m)
	return append(b, '}')
}

// appendMemberUpdate is the queueMemberUpdate payload: the member plus its
// queue, so a client can route it without knowing the key scheme.
func appendMemberUpdate(b []byte, m *QueueMember) []byte {
	b = append(b, '{')
	b = appendStrField(b, "queue", m.Queue)
	b = append(b, ',')
	b = appendMemberFields(b, m)
	return append(b, '}')
}

// appendMembers writes a queue's members object, by key.
func appendMembers(b []byte, m map[string]*QueueMember) []byte {
	b = append(b, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendMember(b, m[k])
	}
	return append(b, '}')
}

// appendQueue writes a queue, its members from the engine's pieces when
// it has them (queuepieces.go: the bytes appendMembers would write), in
// a buffer grown once to about its size (the engine's queue is made
// whole on first need, from nothing); at is unused (no durations in a
// queue).
func appendQueue(b []byte, q *Queue, _ int64, e enc) []byte {
	p := q.pieces
	if p.of(q.Members) {
		b = slices.Grow(b, 256+p.jsonLen()+queueCallerSize*len(q.WaitingCallers))
	}
	b = appendKey(appendQueueFields(b, q), "members")
	if p.of(q.Members) {
		b = p.appendJSON(b)
	} else {
		b = appendMembers(b, q.Members)
	}
	return appendQueueTail(b, q, e)
}

// queueCallerSize is about what a waiting caller's JSON takes.
const queueCallerSize = 192

// appendQueueFields writes a queue's fields before its members (its
// change, queuedelta.go, has what changed in them there instead), and
// appendQueueTail what follows them.
func appendQueueFields(b []byte, q *Queue) []byte {
	b = append(b, '{')
	b = appendStrField(b, "queue", q.Queue)
	b = append(b, ',')
	b = appendStrField(b, "name", q.Name)
	b = append(b, ',')
	b = appendStrField(b, "number", cmp.Or(q.Number, q.Queue))
	return append(b, ',')
}

func appendQueueTail(b []byte, q *Queue, e enc) []byte {
	b = append(b, ',')
	b = appendKey(b, "waitingCallers")
	b = append(b, '{')
	for i, k := range sortedKeys(q.WaitingCallers) {
		if i > 0 {
			b = append(b, ',')
		}
		w := q.WaitingCallers[k]
		b = e.channel(b, k)
		b = append(b, ':', '{')
		b = e.channel(appendKey(b, "channel"), w.Channel)
		b = append(b, ',')
		b = e.secret(appendKey(b, "num"), w.Num)
		b = append(b, ',')
		b = e.secret(appendKey(b, "name"), w.Name)
		b = append(b, ',')
		b = appendIntField(b, "position", int64(w.Position))
		b = append(b, ',')
		b = appendIntField(b, "waitingSince", w.WaitingSince)
		b = append(b, '}')
	}
	b = append(b, '}')
	for _, f := range [...]struct {
		k string
		v int
	}{{"completed", q.Completed}, {"abandoned", q.Abandoned}, {"holdTime", q.HoldTime}, {"talkTime", q.TalkTime},
		{"serviceLevel", q.ServiceLevel}, {"completedInServiceLevel", q.CompletedInSL}, {"abandonedInServiceLevel", q.AbandonedInSL}} {
		b = appendIntField(append(b, ','), f.k, int64(f.v))
	}
	return append(appendPBX(b, q.PBX), '}')
}

// appendParking writes a parking space; at is unused.
func appendParking(b []byte, p *Parking, _ int64, e enc) []byte {
	b = append(b, '{')
	b = appendStrField(b, "parking", p.Parking)
	b = append(b, ',')
	b = appendStrField(b, "name", p.Name)
	b = append(b, ',')
	b = appendIntField(b, "timeout", int64(p.Timeout))
	b = append(b, ',')
	b = appendKey(b, "parkedCaller")
	if c := p.ParkedCaller; c == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		b = e.channel(appendKey(b, "channel"), c.Channel)
		b = append(b, ',')
		b = e.secret(appendKey(b, "num"), c.Num)
		b = append(b, ',')
		b = e.secret(appendKey(b, "name"), c.Name)
		b = append(b, ',')
		b = appendIntField(b, "parkedAt", c.ParkedAt)
		b = append(b, ',')
		b = appendStrField(b, "parkedBy", c.ParkedBy)
		b = append(b, '}')
	}
	return append(appendPBX(b, p.PBX), '}')
}

// appendRinging is the extenRinging payload of r, of PBX pbx ("" the
// default); at its size unless a string needs escaping.
func appendRinging(b []byte, r *Ringing, pbx string) []byte {
	if b == nil {
		b = make([]byte, 0, 92+len(r.Exten)+len(r.CallerNum)+len(r.CallerName)+len(r.Queue)+len(r.Convid)+len(r.PhonebookName)+len(pbx))
	}
	b = append(b, `{"exten":`...)
	b = appendString(b, r.Exten)
	b = append(b, `,"callerNum":`...)
	b = appendString(b, r.CallerNum)
	b = append(b, `,"callerName":`...)
	b = appendString(b, r.CallerName)
	b = append(b, `,"queue":`...)
	b = appendString(b, r.Queue)
	b = append(b, `,"convid":`...)
	b = appendString(b, r.Convid)
	b = append(b, `,"phonebookName":`...)
	b = appendString(b, r.PhonebookName)
	return append(appendPBX(b, pbx), '}')
}

// appendPresence is the userPresenceUpdate payload of p, of PBX pbx.
func appendPresence(b []byte, p *Presence, pbx string) []byte {
	if b == nil {
		b = make([]byte, 0, 32+len(p.Exten)+len(p.Status)+len(pbx))
	}
	b = append(b, `{"exten":`...)
	b = appendString(b, p.Exten)
	b = append(b, `,"status":`...)
	b = appendString(b, p.Status)
	return append(appendPBX(b, pbx), '}')
}

// appendPBX writes ,"pbx":"site2" last in an object of a named PBX, and
// nothing for the default PBX: its JSON stays as it was.
func appendPBX(b []byte, pbx string) []byte {
	if pbx == "" {
		return b
	}
	b = append(b, ',')
	return appendStrField(b, "pbx", pbx)
}

func appendStatus(b []byte, link LinkState, version uint64, since int64) []byte {
	b = append(b, '{')
	b = appendStrField(b, "pbx", link.String())
	b = append(b, ',')
	b = appendKey(b, "version")
	b = strconv.AppendUint(b, version, 10)
	b = append(b, ',')
	b = appendIntField(b, "since", since)
	return append(b, '}')
}

// appendCollection writes {"k":<entity>,...} in sorted key order from
// the entities' encodings in class c.
func appendCollection[V any](b []byte, m map[string]*ent[V], c Class) []byte {
	b = append(b, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, m[k].json(c)...)
	}
	return append(b, '}')
}
