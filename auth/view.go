package auth

// View is what one user may see of the live state. REST and the WebSocket
// hub pass every piece of pre-encoded state JSON through it, so both filter
// the same way. It works on the JSON bytes the calls package encodes once
// per change, so a user who may see everything costs nothing and a
// filtered user costs one scan of the entities that hold hidden details.
//
// What is hidden (docs/design.md "Users and permissions": the numbers and
// names in other people's calls):
//   - in an extension or a trunk: every conversation's counterpartNum and
//     counterpartName, unless Allowed(u, SeeCalls, owner);
//   - in a queue: the num and name of waiting callers, unless
//     Allowed(u, SeeCalls, "");
//   - in a parking space: the parked caller's num and name, likewise.
//
// Presence (status, dnd, forwarding, registration) is never hidden.
type View struct {
	u *User
}

// ViewOf returns the view of u.
func ViewOf(u *User) View { return View{u} }

// Full reports whether the view hides nothing.
func (v View) Full() bool { return v.u != nil && v.u.viewKey == "" }

// Key names the view: equal keys see equal bytes ("" hides nothing).
func (v View) Key() string {
	if v.u == nil {
		return "nobody"
	}
	return v.u.viewKey
}

// Extension returns the JSON of extension exten as the view shows it:
// data itself when nothing is hidden, otherwise a redacted copy.
func (v View) Extension(exten string, data []byte) []byte {
	if Allowed(v.u, SeeCalls, exten) {
		return data
	}
	return redact(data, isConvDetail)
}

// Trunk returns a trunk's JSON as the view shows it.
func (v View) Trunk(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, isConvDetail)
}

// Queue returns a queue's JSON as the view shows it.
func (v View) Queue(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, isWaitingCallerDetail)
}

// Parking returns a parking space's JSON as the view shows it.
func (v View) Parking(data []byte) []byte {
	if Allowed(v.u, SeeCalls, "") {
		return data
	}
	return redact(data, isParkedCallerDetail)
}

// Conversation returns a conversation's JSON (of owner's) as the view shows
// it.
func (v View) Conversation(owner string, data []byte) []byte {
	if Allowed(v.u, SeeCalls, owner) {
		return data
	}
	return redact(data, func(path []string, key string) bool {
		return key == "counterpartNum" || key == "counterpartName" || isConvExtraDetail(path, key)
	})
}

func isConvDetail(path []string, key string) bool {
	if len(path) < 2 || path[0] != "conversations" {
		return false
	}
	return key == "counterpartNum" || key == "counterpartName" || isConvExtraDetail(path[2:], key)
}

// isConvExtraDetail: inside a conversation, the spied extension and who
// parked the call name the counterpart too.
func isConvExtraDetail(path []string, key string) bool {
	return len(path) == 1 && (path[0] == "spy" && key == "exten" || path[0] == "parked" && key == "by")
}

func isWaitingCallerDetail(path []string, key string) bool {
	return (key == "num" || key == "name") && len(path) == 2 && path[0] == "waitingCallers"
}

func isParkedCallerDetail(path []string, key string) bool {
	return (key == "num" || key == "name") && len(path) == 1 && path[0] == "parkedCaller"
}

// redact copies a JSON object, replacing with "" every string value whose
// key hide(path, key) selects; path is the keys of the enclosing objects
// from the top (array levels are not named). Input that is not well-formed
// JSON yields "{}" rather than leaking anything.
func redact(data []byte, hide func(path []string, key string) bool) []byte {
	r := redactor{in: data, out: make([]byte, 0, len(data)), hide: hide}
	if !r.value(nil, "", false) {
		return []byte("{}")
	}
	return r.out
}

type redactor struct {
	in   []byte
	i    int
	out  []byte
	hide func([]string, string) bool
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

// value copies one value; blank replaces a string value with "".
func (r *redactor) value(path []string, key string, blank bool) bool {
	r.ws()
	if r.i >= len(r.in) {
		return false
	}
	switch c := r.in[r.i]; c {
	case '{':
		r.out = append(r.out, '{')
		r.i++
		var sub []string // the keys leading here; the top object has none
		if r.nested {
			sub = append(path[:len(path):len(path)], key)
		}
		r.nested = true
		first := true
		for {
			r.ws()
			if r.i >= len(r.in) {
				return false
			}
			if r.in[r.i] == '}' {
				r.out = append(r.out, '}')
				r.i++
				return true
			}
			if !first {
				if r.in[r.i] != ',' {
					return false
				}
				r.out = append(r.out, ',')
				r.i++
				r.ws()
			}
			first = false
			if r.i >= len(r.in) || r.in[r.i] != '"' {
				return false
			}
			k, ok := r.str()
			if !ok {
				return false
			}
			r.out = append(r.out, k...)
			r.ws()
			if r.i >= len(r.in) || r.in[r.i] != ':' {
				return false
			}
			r.out = append(r.out, ':')
			r.i++
			name := string(k[1 : len(k)-1])
			if !r.value(sub, name, r.hide(sub, name)) {
				return false
			}
		}
	case '[':
		r.out = append(r.out, '[')
		r.i++
		first := true
		for {
			r.ws()
			if r.i >= len(r.in) {
				return false
			}
			if r.in[r.i] == ']' {
				r.out = append(r.out, ']')
				r.i++
				return true
			}
			if !first {
				if r.in[r.i] != ',' {
					return false
				}
				r.out = append(r.out, ',')
				r.i++
			}
			first = false
			if !r.value(path, key, blank) {
				return false
			}
		}
	case '"':
		s, ok := r.str()
		if !ok {
			return false
		}
		if blank {
			r.out = append(r.out, '"', '"')
		} else {
			r.out = append(r.out, s...)
		}
		return true
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
