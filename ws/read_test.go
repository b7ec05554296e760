package ws

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// rawDial upgrades a plain TCP connection to e's /ws with user's token,
// by hand, so that a test writes the frames it wants.
func (e *env) rawDial(user string) net.Conn {
	e.t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "ws://"), "/ws")
	nc, err := net.Dial("tcp", host)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	authz := "" // user "": no token, the auth message first
	if user != "" {
		authz = "Authorization: Bearer " + e.token(user) + "\r\n"
	}
	fmt.Fprintf(nc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n", host, authz)
	var resp []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(resp, []byte("\r\n\r\n")) { // byte by byte: not a byte of the frames
		if _, err := nc.Read(b); err != nil {
			e.t.Fatalf("upgrade: %v after %q", err, resp)
		}
		resp = append(resp, b[0])
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101")) {
		e.t.Fatalf("upgrade: %q", resp)
	}
	return nc
}

// clientFrame is a client frame: fin, opcode, masked with a key that
// changes the bytes (unless masked is false).
func clientFrame(fin bool, op byte, p []byte, masked bool) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	var m byte
	if masked {
		m = 0x80
	}
	switch n := len(p); {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xFFFF:
		b = append(b, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !masked {
		return append(b, p...)
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, key[:]...)
	for i, x := range p {
		b = append(b, x^key[i&3])
	}
	return b
}

// serverFrame reads one server frame: its opcode and payload.
func serverFrame(t testing.TB, r io.Reader) (byte, []byte) {
	t.Helper()
	op, p, err := readServerFrame(r)
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return op, p
}

func readServerFrame(r io.Reader) (byte, []byte, error) {
	var h [10]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		io.ReadFull(r, h[2:4])
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		io.ReadFull(r, h[2:10])
		n = binary.BigEndian.Uint64(h[2:10])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0F, p, nil
}

// untilClose reads server frames until a close and returns its code; it
// fails the test if the connection ends first.
func untilClose(t testing.TB, r io.Reader) int {
	t.Helper()
	for {
		op, p := serverFrame(t, r)
		if op == opClose {
			if len(p) < 2 {
				return websocket.CloseNoStatusReceived
			}
			return int(p[0])<<8 | int(p[1])
		}
	}
}

// TestReadFrames: the hub's reader takes the frames RFC 6455 lets a
// client send (fragments, control frames between them, a message of
// exactly 4 KiB) and closes on those it forbids, reading exactly past
// them (an unmasked frame's header has no mask: its payload starts two
// bytes earlier), so that it finds the client's close reply and ends the
// connection at once, not after CloseWait.
func TestReadFrames(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{CloseWait: 8 * time.Second})
	sub := []byte(`{"op":"subscribe","topics":["extensions"]}`)
	t.Run("fragments and a ping between them", func(t *testing.T) {
		nc := e.rawDial("alice")
		nc.Write(clientFrame(false, opText, sub[:10], true))
		nc.Write(clientFrame(true, opPing, []byte("abc"), true))
		nc.Write(clientFrame(false, 0, sub[10:20], true))
		nc.Write(clientFrame(true, 0, sub[20:], true))
		got := map[string]bool{}
		for !got["snapshot"] || !got["pong abc"] {
			op, p := serverFrame(t, nc)
			switch op {
			case opPong:
				got["pong "+string(p)] = true
			case opText:
				if bytes.HasPrefix(p, []byte(`{"op":"snapshot"`)) {
					got["snapshot"] = true
				}
			case opClose:
				t.Fatalf("closed: %q", p)
			}
		}
	})
	t.Run("message of 4096 bytes", func(t *testing.T) {
		nc := e.rawDial("alice")
		ping := []byte(`{"op":"ping"}`)
		msg := append(ping, bytes.Repeat([]byte(" "), maxClientMessage-len(ping))...)
		nc.Write(clientFrame(true, opText, msg, true))
		for {
			op, p := serverFrame(t, nc)
			if op == opClose {
				t.Fatalf("closed: %q", p)
			}
			if string(p) == `{"op":"pong"}` {
				break
			}
		}
	})
	for _, c := range []struct {
		name   string
		frame  []byte
		code   int
		client bool // the client closed: no reply to send
	}{
		{"message over 4096 bytes", clientFrame(true, opText, bytes.Repeat([]byte(" "), maxClientMessage+1), true), websocket.CloseMessageTooBig, false},
		{"message over 4096 bytes in fragments", append(clientFrame(false, opText, bytes.Repeat([]byte(" "), 4000), true),
			clientFrame(true, 0, bytes.Repeat([]byte(" "), 97), true)...), websocket.CloseMessageTooBig, false},
		{"unmasked frame", clientFrame(true, opText, sub, false), websocket.CloseProtocolError, false},
		{"unmasked empty ping", clientFrame(true, opPing, nil, false), websocket.CloseProtocolError, false},
		{"unmasked frame of 2 bytes", clientFrame(true, opText, []byte("{}"), false), websocket.CloseProtocolError, false},
		{"unmasked frame with a 16-bit length", clientFrame(true, opText, bytes.Repeat([]byte(" "), 300), false), websocket.CloseProtocolError, false},
		{"reserved bit", append([]byte{0xC1}, clientFrame(true, opText, sub, true)[1:]...), websocket.CloseProtocolError, false},
		{"unknown opcode", clientFrame(true, 0x3, sub, true), websocket.CloseProtocolError, false},
		{"fragmented ping", clientFrame(false, opPing, nil, true), websocket.CloseProtocolError, false},
		{"continuation first", clientFrame(true, 0, sub, true), websocket.CloseProtocolError, false},
		{"message inside a message", append(clientFrame(false, opText, sub[:5], true), clientFrame(true, opText, sub, true)...), websocket.CloseProtocolError, false},
		{"binary message", clientFrame(true, 0x2, sub, true), CloseProtocolError, false},
		{"client's close echoed", clientFrame(true, opClose, []byte{0x0F, 0xA0, 'b', 'y', 'e'}, true), 4000, true},
		{"client's close without a code", clientFrame(true, opClose, nil, true), websocket.CloseNormalClosure, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc := e.rawDial("alice")
			nc.Write(c.frame)
			if got := untilClose(t, nc); got != c.code {
				t.Errorf("closed with %d, want %d", got, c.code)
			}
			// Then the server ends the connection (after the reply to its
			// close, or at once after echoing the client's).
			if !c.client {
				nc.Write(clientFrame(true, opClose, []byte{0x03, 0xE8}, true))
			}
			start := time.Now()
			if _, err := io.Copy(io.Discard, nc); err != nil {
				t.Errorf("the server did not end the connection: %v", err)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("the server ended the connection %v after the close reply: it did not read the reply", d)
			}
		})
	}
}

// TestSilentClientDropped: a client that answers nothing, not even the
// hub's pings, is dropped once silent for twice the ping interval (plus
// the slack, none here); one that answers them stays.
func TestSilentClientDropped(t *testing.T) {
	slack := silenceSlack
	silenceSlack = 0
	t.Cleanup(func() { silenceSlack = slack })
	const ping = 100 * time.Millisecond
	// Parked (a plain TCP connection) and with a reader blocked in a
	// read under its deadline (a wrapped one, as TLS).
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprint("wrapped=", wrapped), func(t *testing.T) {
			e := newEnv(t, calls.Config{}, auth.Config{}, Config{PingInterval: ping})
			if wrapped {
				e = e.wrapped()
			}
			live := e.rawDial("bob")
			live.SetDeadline(time.Time{})
			texts := make(chan string, 16)
			go func() { // answers the pings, hands on the messages
				defer close(texts)
				for {
					op, p, err := readServerFrame(live)
					if err != nil {
						return
					}
					switch op {
					case opPing:
						live.Write(clientFrame(true, opPong, p, true))
					case opText:
						texts <- string(p)
					}
				}
			}()
			nc := e.rawDial("alice")
			start := time.Now()
			pings := 0
			for {
				op, _, err := readServerFrame(nc)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("silent client: %v, want the connection ended", err)
				}
				switch op {
				case opPing:
					pings++
				case opClose:
					t.Fatal("closed with a close frame: a silent client is dropped")
				}
			}
			if pings == 0 {
				t.Error("dropped before any ping")
			}
			if d := time.Since(start); d < 2*ping || d > 10*time.Second {
				t.Errorf("silent client dropped after %v, want 200-300 ms", d)
			}
			// The client that answered every ping meanwhile is still served.
			live.Write(clientFrame(true, opText, []byte(`{"op":"ping"}`), true))
			timeout := time.After(10 * time.Second)
			for {
				select {
				case m, ok := <-texts:
					if !ok {
						t.Fatal("the client that answered the pings was dropped")
					}
					if m != `{"op":"pong"}` {
						continue
					}
				case <-timeout:
					t.Fatal("no pong")
				}
				break
			}

		})
	}
}

// TestCloseParkedNoReply: a parked client that never answers the close
// is woken by the close, waited for CloseWait, then dropped: Hub.Close
// returns.
func TestCloseParkedNoReply(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{CloseWait: 200 * time.Millisecond})
	nc := e.rawDial("alice")
	if op, p := serverFrame(t, nc); op != opText || !bytes.HasPrefix(p, []byte(`{"op":"hello"`)) {
		t.Fatalf("first frame %d %q, want the hello", op, p)
	}
	time.Sleep(50 * time.Millisecond) // parked by now
	// A parked client not woken by Close would wait here for ever: fail
	// instead.
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	done := make(chan struct{})
	go func() { e.hub.Close(); close(done) }()
	if code := untilClose(t, nc); code != CloseGoingAway {
		t.Errorf("closed with %d, want %d", code, CloseGoingAway)
	}
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Errorf("after the close: %v, want the connection ended", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestPingBeforeAuth: a client without a token may ping before its auth
// message; the ping is answered and the auth message then accepted.
func TestPingBeforeAuth(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	nc := e.rawDial("")
	nc.Write(clientFrame(true, opPing, []byte("p"), true))
	if op, p := serverFrame(t, nc); op != opPong || string(p) != "p" {
		t.Fatalf("answer to the ping %d %q, want its pong", op, p)
	}
	nc.Write(clientFrame(true, opText, []byte(`{"op":"auth","token":"`+e.token("alice")+`"}`), true))
	if op, p := serverFrame(t, nc); op != opText || !bytes.HasPrefix(p, []byte(`{"op":"hello"`)) {
		t.Fatalf("after the auth message %d %q, want the hello", op, p)
	}
}

// TestHeardEveryStep: the reader notes that its client was heard (and
// pushes the read deadline out) at most once a heardStep, however often
// the client sends, and the deadline it sets still gives the client
// silentFor from its last frame.
func TestHeardEveryStep(t *testing.T) {
	h := bareHub(t, calls.New(calls.Config{}), testUsers(t))
	c := loopConn(t, h)
	step := h.heardStep()
	if step <= 0 || h.silentFor() < int64(2*h.cfg.PingInterval+silenceSlack)+step {
		t.Fatalf("heardStep %v, silentFor %v", time.Duration(step), time.Duration(h.silentFor()))
	}
	c.heard = h.now() - step
	c.extendRead()
	first := c.heard
	if h.now()-first > int64(time.Second) {
		t.Fatalf("heard %v ago after a read", time.Duration(h.now()-first))
	}
	for range 100 {
		c.extendRead()
	}
	if c.heard != first {
		t.Errorf("heard noted again %v after the last time, within a step (%v)", time.Duration(c.heard-first), time.Duration(step))
	}
	c.heard -= step
	c.extendRead()
	if c.heard == first-step {
		t.Error("heard not noted once a step had passed")
	}
}
