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
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16), ReaderConfig{MaxLine: 512, MaxMessage: 2048})
		r.ReadBanner() // may fail; frames are read regardless
		for range len(data) + 1 {
			m, err := r.ReadMessage()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrProtocol) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(m.Headers) == 0 {
				t.Fatal("empty message returned")
			}
			b, err := AppendMessage([]byte("Banner\r\n"), m)
			if err != nil {
				t.Fatalf("parsed message cannot be written: %v: %q", err, m.Headers)
			}
			r2 := NewReader(bufio.NewReader(bytes.NewReader(b)), ReaderConfig{})
			if _, err := r2.ReadBanner(); err != nil {
				t.Fatal(err)
			}
			m2, err := r2.ReadMessage()
			if err != nil {
				t.Fatalf("re-read: %v", err)
			}
			if len(m2.Headers) != len(m.Headers) {
				t.Fatalf("round trip %q -> %q", m.Headers, m2.Headers)
			}
			for i := range m.Headers {
				if m.Headers[i] != m2.Headers[i] {
					t.Fatalf("round trip header %d: %q -> %q", i, m.Headers[i], m2.Headers[i])
				}
			}
		}
		t.Fatal("more frames than bytes: the reader loops")
	})
}
