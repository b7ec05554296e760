package ami

import (
	"errors"
	"fmt"
	"strings"
)

// Header is one "Key: Value" line of a message. Key keeps the case it had on
// the wire.
type Header struct {
	Key   string
	Value string
}

// Message is one AMI frame: an action, a response or an event. Headers keep
// their wire order, their original key case and repeated keys (ChanVariable,
// Variable, Output). Lookups by key are case-insensitive, as Asterisk's own are.
//
// A Message read by a Reader is immutable in practice: its strings share one
// backing allocation and may be retained freely. The zero Message is empty.
type Message struct {
	Headers []Header
}

// Kind says what a message is, from its first header.
type Kind uint8

const (
	KindUnknown  Kind = iota
	KindAction        // "Action: ..." sent by a client
	KindResponse      // "Response: ..." answering an action
	KindEvent         // "Event: ..." from the server
)

func (k Kind) String() string {
	switch k {
	case KindAction:
		return "action"
	case KindResponse:
		return "response"
	case KindEvent:
		return "event"
	}
	return "unknown"
}

// NewAction starts an action message. Headers are added with Add; the client
// sets ActionID when it sends it unless one is present.
func NewAction(name string, kv ...string) Message {
	m := Message{Headers: make([]Header, 0, 4+len(kv)/2)}
	m.Headers = append(m.Headers, Header{"Action", name})
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, Header{kv[i], kv[i+1]})
	}
	return m
}

// Add appends a header and returns the message, so calls chain.
// Validation happens when the message is written: see Validate.
func (m Message) Add(key, value string) Message {
	m.Headers = append(m.Headers, Header{key, value})
	return m
}

// Get returns the value of the first header named key (case-insensitive),
// or "" when there is none.
func (m Message) Get(key string) string {
	v, _ := m.Lookup(key)
	return v
}

// Lookup is Get that also says whether the header exists.
func (m Message) Lookup(key string) (string, bool) {
	// Exact case first: it is what Asterisk sends and it is cheaper.
	for i := range m.Headers {
		if m.Headers[i].Key == key {
			return m.Headers[i].Value, true
		}
	}
	for i := range m.Headers {
		if strings.EqualFold(m.Headers[i].Key, key) {
			return m.Headers[i].Value, true
		}
	}
	return "", false
}

// Values returns every value of the headers named key, in order.
func (m Message) Values(key string) []string {
	var out []string
	for _, h := range m.Headers {
		if strings.EqualFold(h.Key, key) {
			out = append(out, h.Value)
		}
	}
	return out
}

// Set replaces the first header named key or appends it. It returns the
// message, which may share Headers with m.
func (m Message) Set(key, value string) Message {
	for i := range m.Headers {
		if strings.EqualFold(m.Headers[i].Key, key) {
			hs := make([]Header, len(m.Headers))
			copy(hs, m.Headers)
			hs[i].Value = value
			return Message{Headers: hs}
		}
	}
	return m.Add(key, value)
}

// Kind reports whether m is an action, a response or an event, from its first
// header (Asterisk always puts it first).
func (m Message) Kind() Kind {
	if len(m.Headers) == 0 {
		return KindUnknown
	}
	k := m.Headers[0].Key
	switch {
	case strings.EqualFold(k, "Event"):
		return KindEvent
	case strings.EqualFold(k, "Response"):
		return KindResponse
	case strings.EqualFold(k, "Action"):
		return KindAction
	}
	return KindUnknown
}

// Event is the event name ("Newchannel"), or "" when m is not an event.
func (m Message) Event() string {
	if m.Kind() != KindEvent {
		return ""
	}
	return m.Headers[0].Value
}

// Action is the action name, or "" when m is not an action.
func (m Message) Action() string {
	if m.Kind() != KindAction {
		return ""
	}
	return m.Headers[0].Value
}

// Response is the response status ("Success", "Error", "Goodbye"), or "".
func (m Message) Response() string {
	if m.Kind() != KindResponse {
		return ""
	}
	return m.Headers[0].Value
}

// ActionID is the ActionID header, or "".
func (m Message) ActionID() string { return m.Get("ActionID") }

// String renders the message for logs, with Secret and Key redacted.
func (m Message) String() string {
	var b strings.Builder
	for i, h := range m.Headers {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(h.Key)
		b.WriteString("=")
		if isSecretKey(h.Key) {
			b.WriteString("***")
		} else {
			b.WriteString(h.Value)
		}
	}
	return b.String()
}

// isSecretKey reports headers that carry credentials and must never be logged
// or recorded.
func isSecretKey(k string) bool {
	return strings.EqualFold(k, "Secret") || strings.EqualFold(k, "Key")
}

// ErrInjection is returned (wrapped in a *HeaderError) when a header key or
// value holds CR, LF or NUL. Writing such a header would let its value start
// a new header or a new action on the wire: AMI command injection.
var ErrInjection = errors.New("ami: CR, LF or NUL in header")

// HeaderError says which header of a message cannot be written and why.
type HeaderError struct {
	Key string // as given, possibly containing the offending bytes
	Err error
}

func (e *HeaderError) Error() string { return fmt.Sprintf("ami: header %q: %v", e.Key, e.Err) }
func (e *HeaderError) Unwrap() error { return e.Err }

var errBadKey = errors.New("empty key or key containing ':'")

// Validate checks that every header can be written without changing the
// frame's meaning: keys non-empty without ':', and no CR, LF or NUL anywhere.
// (A value's leading spaces are not kept on the wire: the reader strips them.)
func (m Message) Validate() error {
	for _, h := range m.Headers {
		if strings.ContainsAny(h.Key, "\r\n\x00") || strings.ContainsAny(h.Value, "\r\n\x00") {
			return &HeaderError{Key: h.Key, Err: ErrInjection}
		}
		if h.Key == "" || strings.IndexByte(h.Key, ':') >= 0 {
			return &HeaderError{Key: h.Key, Err: errBadKey}
		}
	}
	return nil
}
