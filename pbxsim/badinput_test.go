package pbxsim

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// rawSIP sends one datagram to the PBX and returns the first response
// line received within wait ("" when none).
func rawSIP(t *testing.T, conn net.PacketConn, to net.Addr, msg string, wait time.Duration) string {
	t.Helper()
	if _, err := conn.WriteTo([]byte(msg), to); err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(msg, "Call-ID: ")
	callID, _, _ := strings.Cut(rest, "\r\n")
	buf := make([]byte, 65535)
	conn.SetReadDeadline(time.Now().Add(wait))
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return ""
		}
		// Skip late answers to earlier cases.
		if callID != "" && strings.Contains(string(buf[:n]), "Call-ID: "+callID+"\r\n") {
			line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
			return line
		}
	}
}

// rawSocket is a UDP socket for raw SIP to p, closed when the test ends:
// the socket, p's address and the socket's own ("127.0.0.1:port").
func rawSocket(t *testing.T, p *PBX) (net.PacketConn, net.Addr, string) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	to, err := net.ResolveUDPAddr("udp", p.SIPAddr())
	if err != nil {
		t.Fatal(err)
	}
	return conn, to, conn.LocalAddr().String()
}

func TestMalformedSIP(t *testing.T) {
	p := startPBX(t, Config{})
	conn, to, me := rawSocket(t, p)
	via := "Via: SIP/2.0/UDP " + me + ";branch=z9hG4bK-bad%d\r\n"
	// What the stack answers: sipgo refuses requests it cannot build a
	// transaction for with 400 (missing CSeq); what it cannot parse at all
	// (garbage, a body shorter than Content-Length) is dropped without an
	// answer, as there is no Via to answer to.
	cases := []struct {
		name, msg, want string
	}{
		{"garbage", "\x00\x01hello there\r\n\r\n", ""},
		{"no CSeq", "INVITE sip:202@127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 1) + "From: <sip:201@x>;tag=1\r\nTo: <sip:202@x>\r\nCall-ID: bad1\r\nContent-Length: 0\r\n\r\n", "SIP/2.0 400"},
		{"bad Content-Length", "OPTIONS sip:127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 2) + "From: <sip:201@x>;tag=1\r\nTo: <sip:x@x>\r\nCall-ID: bad2\r\nCSeq: 1 OPTIONS\r\nContent-Length: 99999\r\n\r\n", ""},
		{"INVITE without Contact", "INVITE sip:202@127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 3) + "From: <sip:201@x>;tag=1\r\nTo: <sip:202@x>\r\nCall-ID: bad3\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n", "SIP/2.0 400"},
		{"REGISTER unknown user", "REGISTER sip:127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 4) + "From: <sip:999@x>;tag=1\r\nTo: <sip:999@x>\r\nCall-ID: bad4\r\nCSeq: 1 REGISTER\r\nContact: <sip:999@" + me + ">\r\nContent-Length: 0\r\n\r\n", "SIP/2.0 404"},
		{"BYE outside a dialog", "BYE sip:202@127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 5) + "From: <sip:201@x>;tag=1\r\nTo: <sip:202@x>;tag=2\r\nCall-ID: bad5\r\nCSeq: 2 BYE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n", "SIP/2.0 481"},
		{"INVITE with a bad SDP", "INVITE sip:202@127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 7) + "From: <sip:201@x>;tag=1\r\nTo: <sip:202@x>\r\nCall-ID: bad7\r\nCSeq: 1 INVITE\r\nContact: <sip:201@" + me + ">\r\nContent-Type: application/sdp\r\nContent-Length: 9\r\n\r\nnot a sdp", "SIP/2.0 488"},
		{"unknown method", "FOO sip:202@127.0.0.1 SIP/2.0\r\n" + fmt.Sprintf(via, 6) + "From: <sip:201@x>;tag=1\r\nTo: <sip:202@x>\r\nCall-ID: bad6\r\nCSeq: 1 FOO\r\nContent-Length: 0\r\n\r\n", "SIP/2.0 405"},
	}
	for _, c := range cases {
		wait := 3 * time.Second // generous: a BYE waits 0.5 s for a racing dialog
		if c.want == "" {
			wait = 700 * time.Millisecond
		}
		got := rawSIP(t, conn, to, c.msg, wait)
		if !strings.HasPrefix(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	// Still serving.
	startPhone(t, p, PhoneConfig{Exten: "201"})
}

// TestAbortedDialogs: callers that vanish mid-dialog leave no channel
// after the usual timers (64*T1 for a lost ACK, the ring timeout for a
// caller that never cancels).
func TestAbortedDialogs(t *testing.T) {
	p := startPBX(t, Config{RingTimeout: time.Second})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	conn, to, me := rawSocket(t, p)
	invite := func(n int, target string) string {
		return "INVITE sip:" + target + "@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP " + me + fmt.Sprintf(";branch=z9hG4bK-ab%d\r\n", n) +
			"From: <sip:201@127.0.0.1>;tag=a" + fmt.Sprint(n) + "\r\nTo: <sip:" + target + "@127.0.0.1>\r\nCall-ID: abort" + fmt.Sprint(n) +
			"\r\nCSeq: 1 INVITE\r\nContact: <sip:201@" + me + ">\r\nContent-Type: application/sdp\r\nContent-Length: 0\r\n\r\n"
	}
	// Answered by the simulator, never acknowledged.
	conn.WriteTo([]byte(invite(1, "600")), to)
	// Ringing a phone that never answers; the caller never cancels.
	conn.WriteTo([]byte(invite(2, "202")), to)
	deadline := time.Now().Add(10 * time.Second) // polled: a loaded machine may need more than 1 s
	for len(p.Channels()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(p.Channels()); n != 3 {
		t.Fatalf("%d channels up, want 3: %v", n, p.Channels())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	for len(p.Channels()) > 0 {
		if ctx.Err() != nil {
			t.Fatalf("channels left after the timers: %v", p.Channels())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAMIGarbageClient: a manager client sending garbage is dropped; the
// others keep their events.
func TestAMIGarbageClient(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	bad, err := net.Dial("tcp", p.AMIAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	for i := 0; i < 300; i++ {
		if _, err := bad.Write([]byte("this is not AMI at all\r\n")); err != nil {
			break
		}
	}
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := bad.Read(buf); err != nil {
			break // closed by the server (or the deadline: checked below)
		}
	}
	if p.AMIServer().Stats().Garbage == 0 {
		t.Error("garbage client not dropped")
	}
	startPhone(t, p, PhoneConfig{Exten: "201"})
	capt.waitFor(t, "registration event", func(m []ami.Message) bool { return count(m, "ContactStatus") == 1 })
}
