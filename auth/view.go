package auth

import "slices"

// View is what one user may see of the live state. REST and the WebSocket
// hub pass every piece of pre-encoded state JSON through it, so both filter
// the same way. It works on the JSON bytes the calls package encodes once
// per change, so a user who may see everything costs nothing and a
// filtered user costs one scan of the entities that hold hidden details.
//
// What is hidden (docs/design.md "Users and permissions": the numbers and
// names in other people's calls):
//   - in an extension or a trunk: every conversation's counterpartNum and
//     counterpartName, the spied extension and who parked it, unless
//     Allowed(u, SeeCalls, owner); the conversation ids (the map keys and
//     "id") are rewritten by OpaqueConvID, since channel names can hold
//     numbers (Local/0612345678@from-internal-0000002a;1);
//   - in a queue: the num and name of waiting callers, unless
//     Allowed(u, SeeCalls, ""); their channel (the map key and "channel")
//     is rewritten by OpaqueChannel;
//   - in a parking space: the parked caller's num and name, likewise, and
//     its channel rewritten;
//   - in a conference: the extenId and name of members whose calls u may
//     not see (an outside caller's member entry carries its number).
//
// Uniqueids (callId, linkedId, uniqueId, a transfer's id, a conference
// member's id) are Asterisk's "<epoch>.<counter>": they name no one and are
// kept. Presence (status, dnd, forwarding, registration) is never hidden.
type View struct {
	u *User
}

// ViewOf returns the view of u.
func ViewOf(u *User) View { return View{u} }

// Full reports whether the view hides nothing.
func (v View) Full() bool { return v.u != nil && v.u.viewKey == "" }

// Key names the view: equal keys see equal bytes ("" hides nothing).
// Conferences are the exception: Conference depends on the user itself.
func (v View) Key() string {
	if v.u == nil {
		return "nobody"
	}
	return v.u.viewKey
}

// SeesCalls reports whether the view shows the calls of owner (an
// extension; "" for the calls no extension owns: trunks, queues' waiting
// callers, parked callers) unredacted. Where it does not, the redacted
// JSON depends on the entity's bytes only, never on the user: callers may
// share it between views.
func (v View) SeesCalls(owner string) bool { return Allowed(v.u, SeeCalls, owner) }

// Extension returns the JSON of extension exten as the view shows it:
// data itself when nothing is hidden, otherwise a redacted copy.
func (v View) Extension(exten string, data []byte) []byte {
	if Allowed(v.u, SeeCalls, exten) {
		return data
	}
	return redact(data, convRule)
}

// Trunk returns a trunk's JSON as the view shows it.
func (v View) Trunk(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, convRule)
}

// Queue returns a queue's JSON as the view shows it.
func (v View) Queue(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, waitingCallerRule)
}

// Parking returns a parking space's JSON as the view shows it.
func (v View) Parking(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, parkedCallerRule)
}

// Conversation returns a conversation's JSON (of owner's) as the view shows
// it.
func (v View) Conversation(owner string, data []byte) []byte {
	if Allowed(v.u, SeeCalls, owner) {
		return data
	}
	return redact(data, func(path []string, key string) act {
		if len(path) == 0 {
			return convField(key)
		}
		return convExtraRule(path, key)
	})
}

// Conference returns a conference room's JSON as the view shows it: the
// members whose calls the user may not see keep their id, flags and join
// time, with extenId and name blank. Unlike the other entities this
// depends on the user, not only on the view key.
func (v View) Conference(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	// First pass: which members (by key under "users") to hide.
	var hidden []string
	r := redactor{in: data, rule: func([]string, string) act { return keep },
		seen: func(path []string, key string, raw []byte) {
			if len(path) == 2 && path[0] == "users" && key == "extenId" {
				x, ok := unquote(raw)
				if !ok || x == "" || !Allowed(v.u, SeeCalls, x) {
					hidden = append(hidden, path[1])
				}
			}
		}}
	if !r.value(nil, "", keep) {
		return []byte("{}")
	}
	if len(hidden) == 0 {
		return data
	}
	return redact(data, func(path []string, key string) act {
		if len(path) == 2 && path[0] == "users" && (key == "extenId" || key == "name") && slices.Contains(hidden, path[1]) {
			return blank
		}
		return keep
	})
}

// act is what the redactor does with a string: keep it, blank it or
// rewrite it into its opaque form.
type act uint8

const (
	keep act = iota
	blank
	opaqueConv // a conversation id, by OpaqueConvID
	opaqueChan // a channel name, by OpaqueChannel
)

// keysOf is the pseudo-key a rule is asked about for the keys of the
// object at path (a map of conversations or of waiting callers).
const keysOf = "\x00keys"

func convField(key string) act {
	switch key {
	case "counterpartNum", "counterpartName":
		return blank
	case "id":
		return opaqueConv
	}
	return keep
}

// convRule: the conversations of an extension or a trunk.
func convRule(path []string, key string) act {
	if len(path) == 0 || path[0] != "conversations" {
		return keep
	}
	switch len(path) {
	case 1:
		if key == keysOf {
			return opaqueConv
		}
		return keep
	case 2:
		return convField(key)
	}
	return convExtraRule(path[2:], key)
}

// convExtraRule: inside a conversation, the spied extension and who
// parked the call name the counterpart too.
func convExtraRule(path []string, key string) act {
	if len(path) == 1 && (path[0] == "spy" && key == "exten" || path[0] == "parked" && key == "by") {
		return blank
	}
	return keep
}

func waitingCallerRule(path []string, key string) act {
	switch {
	case len(path) == 1 && path[0] == "waitingCallers" && key == keysOf:
		return opaqueChan
	case len(path) == 2 && path[0] == "waitingCallers":
		return callerField(key)
	}
	return keep
}

func parkedCallerRule(path []string, key string) act {
	if len(path) == 1 && path[0] == "parkedCaller" {
		return callerField(key)
	}
	return keep
}

func callerField(key string) act {
	switch key {
	case "num", "name":
		return blank
	case "channel":
		return opaqueChan
	}
	return keep
}

// redact copies a JSON object, rewriting every string value as rule(path,
// key) says and the keys of an object at path as rule(path, keysOf) says;
// path is the keys of the enclosing objects from the top (array levels are
// not named). Input that is not well-formed JSON yields "{}" rather than
// leaking anything.
func redact(data []byte, rule func(path []string, key string) act) []byte {
	r := redactor{in: data, out: make([]byte, 0, len(data)), rule: rule}
	if !r.value(nil, "", keep) {
		return []byte("{}")
	}
	return r.out
}

type redactor struct {
	in   []byte
	i    int
	out  []byte
	rule func([]string, string) act
	// seen, when set, is told every string value with its place (raw,
	// quotes included).
	seen func(path []string, key string, raw []byte)
	// nested is false until the top-level value has been entered.
	nested bool
}

func (r *redactor) ws() {
	for r.i < len(r.in) {
		switch r.in[r.i] {
		case ' ', '\t', '\n', '\r':
			r.out = append(r.out, r.in[r.i])
			r.i++
		default:
			return
		}
	}
}

// str scans the string starting at r.i (a '"') and returns it raw, quotes
// included. Keys are compared raw: the state JSON's keys are never escaped.
func (r *redactor) str() ([]byte, bool) {
	start := r.i
	r.i++
	for r.i < len(r.in) {
		switch r.in[r.i] {
		case '\\':
			r.i += 2
			continue
		case '"':
			r.i++
			return r.in[start:r.i], true
		}
		r.i++
	}
	return nil, false
}

// emit writes the raw string s (quotes included) as a says.
func (r *redactor) emit(s []byte, a act) bool {
	switch a {
	case keep:
		r.out = append(r.out, s...)
		return true
	case blank:
		r.out = append(r.out, '"', '"')
		return true
	}
	v, ok := unquote(s)
	if !ok {
		return false
	}
	r.out = append(r.out, '"')
	if a == opaqueConv {
		r.out = appendOpaqueConvID(r.out, v)
	} else {
		r.out = appendOpaqueChannel(r.out, v)
	}
	r.out = append(r.out, '"')
	return true
}

// item moves to the next member of the object or array that end closes:
// it copies the comma before it, or the end itself (done); ok is false
// when the input is not JSON.
func (r *redactor) item(end byte, first *bool) (done, ok bool) {
	r.ws()
	if r.i >= len(r.in) {
		return false, false
	}
	if r.in[r.i] == end {
		r.out = append(r.out, end)
		r.i++
		return true, true
	}
	if !*first {
		if r.in[r.i] != ',' {
			return false, false
		}
		r.out = append(r.out, ',')
		r.i++
		r.ws()
	}
	*first = false
	return false, true
}

// object copies the object starting at r.i; path leads to it.
func (r *redactor) object(path []string) bool {
	r.out = append(r.out, '{')
	r.i++
	keys := r.rule(path, keysOf)
	first := true
	for {
		if done, ok := r.item('}', &first); done || !ok {
			return ok
		}
		if r.i >= len(r.in) || r.in[r.i] != '"' {
			return false
		}
		k, ok := r.str()
		if !ok || !r.emit(k, keys) {
			return false
		}
		r.ws()
		if r.i >= len(r.in) || r.in[r.i] != ':' {
			return false
		}
		r.out = append(r.out, ':')
		r.i++
		name := string(k[1 : len(k)-1])
		if !r.value(path, name, r.rule(path, name)) {
			return false
		}
	}
}

// value copies one value, the one of key in the object at path; a says
// what becomes of it when it is a string.
func (r *redactor) value(path []string, key string, a act) bool {
	r.ws()
	if r.i >= len(r.in) {
		return false
	}
	switch c := r.in[r.i]; c {
	case '{':
		var sub []string // the keys leading here; the top object has none
		if r.nested {
			sub = append(path[:len(path):len(path)], key)
		}
		r.nested = true
		return r.object(sub)
	case '[':
		r.out = append(r.out, '[')
		r.i++
		first := true
		for {
			if done, ok := r.item(']', &first); done || !ok {
				return ok
			}
			if !r.value(path, key, a) {
				return false
			}
		}
	case '"':
		s, ok := r.str()
		if !ok {
			return false
		}
		if r.seen != nil {
			r.seen(path, key, s)
		}
		return r.emit(s, a)
	default:
		// number, true, false, null
		start := r.i
		for r.i < len(r.in) {
			switch r.in[r.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				r.out = append(r.out, r.in[start:r.i]...)
				return r.i > start
			}
			r.i++
		}
		r.out = append(r.out, r.in[start:]...)
		return r.i > start
	}
}
