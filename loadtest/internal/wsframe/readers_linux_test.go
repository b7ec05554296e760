package wsframe

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu     sync.Mutex
	heads  []string
	binary []uint64
	closed []string
	done   chan struct{}
}

func (r *recorder) Binary(w, id int, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.binary = append(r.binary, n)
}

func (r *recorder) Message(w, id int, head []byte, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heads = append(r.heads, string(head))
}

func (r *recorder) Closed(w, id int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = append(r.closed, err.Error())
	close(r.done)
}

func serverFrame(op byte, p []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		b = append(b, byte(n))
	case n < 1<<16:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, p...)
}

// TestReaders: a Readers connection upgrades with the token, sends its
// first message, parses frames of every length encoding however the bytes
// are split, keeps the head of each message (the whole message for
// NewWholeReaders), counts binary messages, answers a ping with a pong,
// and reports the server's close code.
func TestReaders(t *testing.T) {
	t.Run("heads", func(t *testing.T) { testReaders(t, false) })
	t.Run("whole", func(t *testing.T) { testReaders(t, true) })
}

func testReaders(t *testing.T, whole bool) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	big := bytes.Repeat([]byte("y"), 70000)
	mid := append([]byte(`{"op":"event","seq":2,"at":5,`), bytes.Repeat([]byte("x"), 300)...)
	pong := make(chan []byte, 1)
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Header.Get("Authorization") != "Bearer tok" || req.URL.Path != "/ws" {
			srvErr <- err
			return
		}
		// The answer and the first frame in one write.
		c.Write(append([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
			serverFrame(1, []byte(`{"op":"hello"}`))...))
		first := make([]byte, 6+len(`{"op":"subscribe"}`))
		if _, err := io.ReadFull(br, first); err != nil {
			srvErr <- err
			return
		}
		var stream []byte
		stream = append(stream, serverFrame(1, mid)...)
		stream = append(stream, serverFrame(9, []byte("pi"))...)
		stream = append(stream, serverFrame(2, []byte{1, 2, 3})...)
		stream = append(stream, serverFrame(1, big)...)
		stream = append(stream, serverFrame(1, mid)...) // in one read, with the tail of big
		for _, b := range stream[:200] {                // byte by byte, then the rest
			c.Write([]byte{b})
			time.Sleep(100 * time.Microsecond)
		}
		c.Write(stream[200:])
		p := make([]byte, 8)
		if _, err := io.ReadFull(br, p); err != nil {
			srvErr <- err
			return
		}
		pong <- p
		c.Write(serverFrame(8, []byte{0x03, 0xe9}))
		srvErr <- nil
	}()
	rec := &recorder{done: make(chan struct{})}
	newR := NewReaders
	if whole {
		newR = NewWholeReaders
	}
	r, err := newR(2, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Dial(ln.Addr().String(), "/ws", "tok", 7, []byte(`{"op":"subscribe"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.done:
	case <-time.After(20 * time.Second):
		t.Fatal("no close")
	}
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
	if p := <-pong; string(p) != "\x8a\x82\x00\x00\x00\x00pi" {
		t.Errorf("pong % x", p)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{`{"op":"hello"}`, string(mid[:HeadMax]), string(big[:HeadMax]), string(mid[:HeadMax])}
	if whole {
		want = []string{`{"op":"hello"}`, string(mid), string(big), string(mid)}
	}
	if len(rec.binary) != 1 || rec.binary[0] != 3 {
		t.Errorf("binary messages %v, want one of 3 bytes", rec.binary)
	}
	if strings.Join(rec.heads, "|") != strings.Join(want, "|") {
		t.Errorf("heads %d: %.60q", len(rec.heads), rec.heads)
	}
	if len(rec.closed) != 1 || rec.closed[0] != "ws_close_1001" {
		t.Errorf("closed %q", rec.closed)
	}
}

type nopHandler struct{ n int }

func (h *nopHandler) Message(w, id int, head []byte, now int64) { h.n += len(head) }
func (h *nopHandler) Closed(w, id int, err error)               {}

// BenchmarkFeed: parsing a read of 64 extension updates (about 400 bytes
// each) for a connection, heads only and whole messages, with the read
// split in two so that one message is gathered across reads.
func BenchmarkFeed(b *testing.B) {
	msg := append([]byte(`{"op":"event","seq":12345,"type":"extenUpdate","at":1764600000000,"data":{`), bytes.Repeat([]byte("x"), 320)...)
	msg = append(msg, '}', '}')
	var stream []byte
	for range 64 {
		stream = append(stream, serverFrame(1, msg)...)
	}
	half := len(stream)/2 + 7
	for _, whole := range []bool{false, true} {
		name := "heads"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			h := &nopHandler{}
			w := &rworker{r: &Readers{h: h, whole: whole}}
			c := &rconn{}
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				if err := w.feed(c, stream[:half], 1); err != nil {
					b.Fatal(err)
				}
				if err := w.feed(c, stream[half:], 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
