package ami

import (
	"bufio"
	"fmt"
)

// WriteMessage writes m as one frame ("Key: Value" lines, CRLF, a blank line)
// to w without flushing. It validates every header first, so a message that
// would smuggle a CR, LF or NUL onto the wire is refused before any byte of it
// is written: see Message.Validate and ErrInjection.
func WriteMessage(w *bufio.Writer, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Len() == 0 {
		return fmt.Errorf("ami: write: empty message")
	}
	for i := range m.Len() {
		h := m.Header(i)
		w.WriteString(h.Key)
		w.WriteString(": ")
		w.WriteString(h.Value)
		w.WriteString("\r\n")
	}
	_, err := w.WriteString("\r\n")
	return err
}

// AppendMessage appends m's wire form to b, with the same validation as
// WriteMessage.
func AppendMessage(b []byte, m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return b, err
	}
	if m.Len() == 0 {
		return b, fmt.Errorf("ami: write: empty message")
	}
	for i := range m.Len() {
		h := m.Header(i)
		b = append(b, h.Key...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...), nil
}
