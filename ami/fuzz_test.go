package ami

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadMessage: the reader never panics or hangs, and every frame it
// returns survives WriteMessage then ReadMessage unchanged.
func FuzzReadMessage(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ami")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// Slices of every recording: small inputs mutate and minimise fast.
		for off := 0; off < len(data); off += 2 << 10 {
			f.Add(data[off:min(len(data), off+2<<10)])
		}
	}
	for _, s := range []string{
		"", "\r\n", "\n\n\n", ":", "Asterisk Call Manager/11.0.0\r\n",
		"B\r\n: v\r\n\r\n", "B\r\nK:\r\n\r\n", "B\r\nK: \t v \r\n\r\n", "B\r\nK: a\rb\r\n\r\n",
		"B\r\nK: v\x00\r\n\r\n", "B\r\nK: v\r\r\r\n\r\n", "B\r\nEvent: A\nX: y\n\n", "B\r\nK: v",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A 16-byte buffer takes the line-by-line path almost always; a
		// large one takes the whole-frame fast path whenever it can. Both
		// must read the same frames and count the same garbage.
		cfg := ReaderConfig{MaxLine: 512, MaxMessage: 2048}
		slow := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16), cfg)
		fast := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 1<<16), cfg)
		slow.ReadBanner()
		fast.ReadBanner()
		for range len(data) + 1 {
			ms, errS := slow.ReadMessage()
			mf, errF := fast.ReadMessage()
			if (errS == nil) != (errF == nil) || len(ms.Headers()) != len(mf.Headers()) {
				t.Fatalf("slow and fast paths disagree: %q (%v) vs %q (%v)", ms.Headers(), errS, mf.Headers(), errF)
			}
			for i := range ms.Headers() {
				if ms.Headers()[i] != mf.Headers()[i] {
					t.Fatalf("slow and fast paths disagree on header %d: %q vs %q", i, ms.Headers()[i], mf.Headers()[i])
				}
			}
			if s, f := slow.Stats(), fast.Stats(); s.Garbage != f.Garbage || s.Oversized != f.Oversized || s.Messages != f.Messages {
				t.Fatalf("stats differ: slow %+v fast %+v", s, f)
			}
		}
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16), cfg)
		r.ReadBanner() // may fail; frames are read regardless
		for range len(data) + 1 {
			m, err := r.ReadMessage()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrProtocol) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(m.Headers()) == 0 {
				t.Fatal("empty message returned")
			}
			b, err := AppendMessage([]byte("Banner\r\n"), m)
			if err != nil {
				t.Fatalf("parsed message cannot be written: %v: %q", err, m.Headers())
			}
			r2 := NewReader(bufio.NewReader(bytes.NewReader(b)), ReaderConfig{})
			if _, err := r2.ReadBanner(); err != nil {
				t.Fatal(err)
			}
			m2, err := r2.ReadMessage()
			if err != nil {
				t.Fatalf("re-read: %v", err)
			}
			if len(m2.Headers()) != len(m.Headers()) {
				t.Fatalf("round trip %q -> %q", m.Headers(), m2.Headers())
			}
			for i := range m.Headers() {
				if m.Headers()[i] != m2.Headers()[i] {
					t.Fatalf("round trip header %d: %q -> %q", i, m.Headers()[i], m2.Headers()[i])
				}
			}
		}
		t.Fatal("more frames than bytes: the reader loops")
	})
}
