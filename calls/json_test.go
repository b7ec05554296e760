package calls

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonStringRef is appendString's JSON string, written rune by rune: the
// reference TestAppendStringWords compares the word-at-a-time scan with.
func jsonStringRef(s string) string {
	var w strings.Builder
	w.WriteByte('"')
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == '"' || r == '\\':
			w.WriteByte('\\')
			w.WriteRune(r)
		case r == '\n':
			w.WriteString(`\n`)
		case r == '\r':
			w.WriteString(`\r`)
		case r == '\t':
			w.WriteString(`\t`)
		case r < 0x20, r == '\u2028', r == '\u2029':
			fmt.Fprintf(&w, `\u%04x`, r)
		case r == utf8.RuneError && size == 1:
			w.WriteString(`\ufffd`)
		default:
			w.WriteRune(r)
		}
	}
	w.WriteByte('"')
	return w.String()
}

// TestAppendStringWords: appendString, which skips 8 plain ASCII bytes at
// a time (plain8), writes every string as the rune-by-rune reference
// does: strings of every length around the word size, each byte that
// must be escaped or starts a multi-byte rune at every position, on a
// plain background and among others.
func TestAppendStringWords(t *testing.T) {
	specials := []string{"\"", "\\", "\x00", "\x1f", "\n", "\x7f", " ", "!", "#", "[", "]", "\x80", "\xff", "é", "\u2028", "日", "\xe2\x80", "\x21", "\x5b", "\x5d"}
	check := func(s string) {
		t.Helper()
		if got, want := string(appendString([]byte("x"), s)), "x"+jsonStringRef(s); got != want {
			t.Fatalf("appendString(%q) = %s, want %s", s, got[1:], want[1:])
		}
	}
	for n := range 26 {
		plain := strings.Repeat("PJSIP/20", 4)[:n]
		check(plain)
		for i := 0; i <= n; i++ {
			for _, sp := range specials {
				check(plain[:i] + sp + plain[i:])
			}
		}
	}
	r := rand.New(rand.NewPCG(18, 64))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(string(b))
	}
	for w := range 256 * 8 { // one special byte in every position of a word
		b := []byte("abcdefghij")
		b[1+w%8] = byte(w / 8)
		check(string(b))
	}
}
