package ami

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// endless writes head, then more bytes than limit without ever ending the
// line or frame, then keeps the stream open (as a peer that hangs would)
// until the test ends.
func endless(t *testing.T, head, chunk string, limit int) *io.PipeReader {
	t.Helper()
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); pr.Close(); <-done })
	go func() {
		defer close(done)
		defer pw.Close()
		if _, err := io.WriteString(pw, head); err != nil {
			return
		}
		for n := 0; n <= limit; n += len(chunk) {
			if _, err := io.WriteString(pw, chunk); err != nil {
				return
			}
		}
		<-stop
	}()
	return pr
}

// readWithin runs ReadMessage and fails the test if it blocks: the error
// must come when the limit is crossed, not when the line or frame ends
// (it never does here). The bound is generous for a loaded machine.
func readWithin(t *testing.T, r *Reader) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := r.ReadMessage(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("ReadMessage still waiting for the end of a line past the limit")
		return nil
	}
}

func TestEndlessLineFailsAtLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bufSize int
		maxLine int
	}{
		{"limit under the buffer", 64 << 10, 1000},
		{"limit over the buffer", 4096, 20000},
		{"defaults", 64 << 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.maxLine
			if limit == 0 {
				limit = DefaultMaxLine
			}
			src := endless(t, "Asterisk Call Manager/11.0.0\r\nEvent: A\r\nK: v\r\n\r\nEvent: B\r\nK: ", strings.Repeat("x", 100), limit)
			var junk []Junk
			r := NewReader(bufio.NewReaderSize(src, tc.bufSize), ReaderConfig{MaxLine: tc.maxLine, OnJunk: func(j Junk, _ []byte) { junk = append(junk, j) }})
			if _, err := r.ReadBanner(); err != nil {
				t.Fatal(err)
			}
			if m, err := r.ReadMessage(); err != nil || m.Event() != "A" {
				t.Fatalf("first frame %v, %v", m, err)
			}
			err := readWithin(t, r)
			if !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want protocol error, too large", err)
			}
			if r.Stats().Oversized != 1 || len(junk) != 1 || junk[0] != JunkLongLine {
				t.Errorf("stats %+v, junk %v", r.Stats(), junk)
			}
		})
	}
}

func TestEndlessFrameFailsAtLimit(t *testing.T) {
	src := endless(t, "Asterisk Call Manager/11.0.0\r\nEvent: A\r\n", "K: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\r\n", 4096)
	var junk []Junk
	r := NewReader(bufio.NewReader(src), ReaderConfig{MaxMessage: 4096, OnJunk: func(j Junk, _ []byte) { junk = append(junk, j) }})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	err := readWithin(t, r)
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want protocol error, too large", err)
	}
	if r.Stats().Oversized != 1 || len(junk) != 1 || junk[0] != JunkLongFrame {
		t.Errorf("stats %+v, junk %v", r.Stats(), junk)
	}
}
