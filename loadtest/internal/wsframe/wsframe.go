package wsframe

import "bytes"

// UintField returns the unsigned number that follows key (such as
// `"seq":`) in a WebSocket frame, or 0. It looks only at the first 200
// bytes, where the hub puts op, seq, type and at, so it stays cheap on
// large snapshots and events.
func UintField(b []byte, key string) uint64 {
	i := bytes.Index(b[:min(len(b), 200)], []byte(key))
	if i < 0 {
		return 0
	}
	var n uint64
	for _, c := range b[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// StringField returns the string that follows key (such as `"op":"`) up
// to the next quote, or "". Like UintField it looks for key only in the
// first 200 bytes.
func StringField(b []byte, key string) string {
	return string(Field(b, key))
}

// Field is StringField without the copy: the bytes of b up to the next
// quote after key, nil without key.
func Field(b []byte, key string) []byte {
	i := bytes.Index(b[:min(len(b), 200)], []byte(key))
	if i < 0 {
		return nil
	}
	v := b[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return nil
	}
	return v[:j]
}
