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
// A Message is a value: its text (every key and value) lives in one string
// and its headers are offsets into it, so reading one costs two allocations,
// neither holding pointers for the garbage collector to follow. Methods that
// change a message (Add, Set, Del) return a new one and never modify m. The
// zero Message is empty. Messages may be shared between goroutines freely.
type Message struct {
	text string
	idx  []int32 // per header: key start, key end, value start, value end
}

// NewMessage returns a message with these headers, in order.
func NewMessage(hs ...Header) Message {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value)
	}
	// Written in a Builder grown to size: its String is the bytes
	// written, not a copy (two allocations, as reading one).
	var b strings.Builder
	b.Grow(n)
	idx := make([]int32, 0, 4*len(hs))
	for _, h := range hs {
		idx = append(idx, int32(b.Len()))
		b.WriteString(h.Key)
		idx = append(idx, int32(b.Len()), int32(b.Len()))
		b.WriteString(h.Value)
		idx = append(idx, int32(b.Len()))
	}
	return Message{text: b.String(), idx: idx}
}

// Len is the number of headers.
func (m Message) Len() int { return len(m.idx) / 4 }

// Header returns header i (0 <= i < Len()).
func (m Message) Header(i int) Header {
	o := m.idx[4*i : 4*i+4 : 4*i+4]
	return Header{Key: m.text[o[0]:o[1]], Value: m.text[o[2]:o[3]]}
}

// key returns the key of header i without building a Header.
func (m Message) key(i int) string { return m.text[m.idx[4*i]:m.idx[4*i+1]] }

// value returns the value of header i.
func (m Message) value(i int) string { return m.text[m.idx[4*i+2]:m.idx[4*i+3]] }

// Headers returns a copy of the headers, in order. It allocates: prefer
// Len and Header in hot paths.
func (m Message) Headers() []Header {
	hs := make([]Header, m.Len())
	for i := range hs {
		hs[i] = m.Header(i)
	}
	return hs
}

// NewAction starts an action message. Headers are added with Add; the client
// sets ActionID when it sends it unless one is present.
func NewAction(name string, kv ...string) Message {
	hs := make([]Header, 0, 1+len(kv)/2)
	hs = append(hs, Header{"Action", name})
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, Header{kv[i], kv[i+1]})
	}
	return NewMessage(hs...)
}

// Add returns m with one more header at the end, so calls chain.
// Validation happens when the message is written: see Validate.
func (m Message) Add(key, value string) Message {
	base := int32(len(m.text))
	idx := make([]int32, len(m.idx), len(m.idx)+4)
	copy(idx, m.idx)
	idx = append(idx, base, base+int32(len(key)), base+int32(len(key)), base+int32(len(key)+len(value)))
	return Message{text: m.text + key + value, idx: idx}
}

// Get returns the value of the first header named key (case-insensitive),
// or "" when there is none.
func (m Message) Get(key string) string {
	v, _ := m.Lookup(key)
	return v
}

// Lookup is Get that also says whether the header exists.
func (m Message) Lookup(key string) (string, bool) {
	if i := m.find(key); i >= 0 {
		return m.value(i), true
	}
	return "", false
}

// find returns the index of the first header named key, or -1.
func (m Message) find(key string) int {
	// Exact case first: it is what Asterisk sends and it is cheaper. The
	// length and the last byte, read straight from the offsets, rule out
	// nearly every other header before a string compare (AMI keys of a
	// length often share a prefix: Channel, Context; Uniqueid, Linkedid).
	if key != "" {
		t, idx, last := m.text, m.idx, key[len(key)-1]
		for i := 0; i+1 < len(idx); i += 4 {
			a, b := int(idx[i]), int(idx[i+1])
			if b-a == len(key) && t[b-1] == last && t[a:b] == key {
				return i / 4
			}
		}
	}
	// Then any case. A key folding to an ASCII key is at least as long (a
	// rune folding to an ASCII letter is one byte or more: K, U+212A KELVIN
	// SIGN, to k), so shorter keys are skipped before EqualFold; and it is
	// longer only if it holds one of the two runes beyond ASCII that fold
	// to ASCII letters (mayFoldToASCII), which messages nearly never do:
	// then only keys of key's length, ending in the same byte but for
	// ASCII case, are compared. That is the cost of a miss (ActionID of a
	// live event), once the exact pass found nothing.
	if n := len(key); n > 0 && isASCII(key) && !mayFoldToASCII(m.text) {
		t, idx, last := m.text, m.idx, key[n-1]|0x20
		for i := 0; i+1 < len(idx); i += 4 {
			a, b := int(idx[i]), int(idx[i+1])
			if b-a == n && t[b-1]|0x20 == last && strings.EqualFold(t[a:b], key) {
				return i / 4
			}
		}
		return -1
	}
	ascii := isASCII(key)
	for i := range m.Len() {
		if k := m.key(i); (!ascii || len(k) >= len(key)) && strings.EqualFold(k, key) {
			return i
		}
	}
	return -1
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Values returns every value of the headers named key, in order.
func (m Message) Values(key string) []string {
	var out []string
	for i := range m.Len() {
		if strings.EqualFold(m.key(i), key) {
			out = append(out, m.value(i))
		}
	}
	return out
}

// Set returns m with the first header named key given value, or with the
// header added when there is none.
func (m Message) Set(key, value string) Message {
	i := m.find(key)
	if i < 0 {
		return m.Add(key, value)
	}
	hs := m.Headers()
	hs[i].Value = value
	return NewMessage(hs...)
}

// Del returns m without the headers named key.
func (m Message) Del(key string) Message {
	hs := m.Headers()
	out := hs[:0]
	for _, h := range hs {
		if !strings.EqualFold(h.Key, key) {
			out = append(out, h)
		}
	}
	if len(out) == len(hs) {
		return m
	}
	return NewMessage(out...)
}

// Insert returns m with a header inserted at position i (0 <= i <= Len()).
func (m Message) Insert(i int, key, value string) Message {
	hs := m.Headers()
	hs = append(hs[:i], append([]Header{{key, value}}, hs[i:]...)...)
	return NewMessage(hs...)
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

// Kind reports whether m is an action, a response or an event, from its first
// header (Asterisk always puts it first).
func (m Message) Kind() Kind {
	idx := m.idx
	if len(idx) < 4 {
		return KindUnknown
	}
	// The key "Event" at the text's start, as NewMessage and the reader
	// lay it out, is compared straight from the text: its load does not
	// wait for the offsets' (two cache misses overlap, not one after the
	// other, when the message is not in cache).
	if len(m.text) >= 5 && m.text[:5] == "Event" && idx[0] == 0 && idx[1] == 5 {
		return KindEvent
	}
	k := m.text[idx[0]:idx[1]]
	switch {
	case k == "Event" || strings.EqualFold(k, "Event"): // Asterisk's case first: cheaper
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
	return m.value(0)
}

// Action is the action name, or "" when m is not an action.
func (m Message) Action() string {
	if m.Kind() != KindAction {
		return ""
	}
	return m.value(0)
}

// Response is the response status ("Success", "Error", "Goodbye"), or "".
func (m Message) Response() string {
	if m.Kind() != KindResponse {
		return ""
	}
	return m.value(0)
}

// ActionID is the ActionID header, or "".
func (m Message) ActionID() string { return m.Get("ActionID") }

// String renders the message for logs, with Secret and Key redacted.
func (m Message) String() string {
	var b strings.Builder
	for i := range m.Len() {
		h := m.Header(i)
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
	for i := range m.Len() {
		h := m.Header(i)
		if strings.ContainsAny(h.Key, "\r\n\x00") || strings.ContainsAny(h.Value, "\r\n\x00") {
			return &HeaderError{Key: h.Key, Err: ErrInjection}
		}
		if h.Key == "" || strings.IndexByte(h.Key, ':') >= 0 {
			return &HeaderError{Key: h.Key, Err: errBadKey}
		}
	}
	return nil
}
