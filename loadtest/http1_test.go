package loadtest

import (
	"bufio"
	"strings"
	"testing"
)

func BenchmarkReadResponse(b *testing.B) {
	resp := "HTTP/1.1 200 OK\r\nContent-Length: 48\r\nContent-Type: application/json\r\nDate: Mon, 30 Nov 2026 10:34:42 GMT\r\n\r\n" + strings.Repeat("x", 48)
	r := strings.NewReader("")
	br := bufio.NewReader(r)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(resp)
		br.Reset(r)
		if _, _, err := readResponse(br); err != nil {
			b.Fatal(err)
		}
	}
}
