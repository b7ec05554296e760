package pbxsim

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawPhone is a hand-driven UDP SIP endpoint: it sees every byte pbxsim
// sends it.
type rawPhone struct {
	t    *testing.T
	conn net.PacketConn
	pbx  net.Addr
}

func newRawPhone(t *testing.T, p *PBX, exten string) *rawPhone {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	to, _ := net.ResolveUDPAddr("udp", p.SIPAddr())
	rp := &rawPhone{t: t, conn: conn, pbx: to}
	me := conn.LocalAddr().String()
	rp.send("REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP " + me + ";branch=z9hG4bK-reg" + exten + "\r\n" +
		"From: <sip:" + exten + "@127.0.0.1>;tag=r1\r\nTo: <sip:" + exten + "@127.0.0.1>\r\nCall-ID: reg-" + exten + "\r\n" +
		"CSeq: 1 REGISTER\r\nContact: <sip:" + exten + "@" + me + ">\r\nExpires: 3600\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n")
	if m := rp.read("SIP/2.0 200", 5*time.Second); m == "" {
		t.Fatal("raw phone: REGISTER not accepted")
	}
	return rp
}

func (rp *rawPhone) send(msg string) {
	rp.t.Helper()
	if _, err := rp.conn.WriteTo([]byte(msg), rp.pbx); err != nil {
		rp.t.Fatal(err)
	}
}

// read returns the next message starting with prefix, skipping others;
// "" after wait.
func (rp *rawPhone) read(prefix string, wait time.Duration) string {
	buf := make([]byte, 65535)
	rp.conn.SetReadDeadline(time.Now().Add(wait))
	for {
		n, _, err := rp.conn.ReadFrom(buf)
		if err != nil {
			return ""
		}
		if m := string(buf[:n]); strings.HasPrefix(m, prefix) {
			return m
		}
	}
}

// header returns the first value of a header of a SIP message.
func header(msg, name string) string {
	for _, l := range strings.Split(msg, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestRetransmitted2xxAcked: a callee whose 200 OK is retransmitted (its
// first ACK lost) gets an ACK for each copy, so it stops retransmitting;
// RFC 3261 §13.2.2.4.
func TestRetransmitted2xxAcked(t *testing.T) {
	p := startPBX(t, Config{})
	callee := newRawPhone(t, p, "202")
	caller := startPhone(t, p, PhoneConfig{Exten: "201"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go caller.Call(ctx, "202")

	inv := callee.read("INVITE ", 5*time.Second)
	if inv == "" {
		t.Fatal("no INVITE reached the callee")
	}
	me := callee.conn.LocalAddr().String()
	ok := "SIP/2.0 200 OK\r\n"
	for _, h := range []string{"Via", "From", "Call-ID", "CSeq"} {
		ok += h + ": " + header(inv, h) + "\r\n"
	}
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	ok += "To: " + header(inv, "To") + ";tag=callee1\r\nContact: <sip:202@" + me + ">\r\nContent-Type: application/sdp\r\n" +
		"Content-Length: " + itoa(len(sdp)) + "\r\n\r\n" + sdp
	for i := range 3 {
		if i == 2 {
			// Past the INVITE transaction's life (64*T1: 3.2 s in these
			// tests), the copy reaches no transaction.
			time.Sleep(3500 * time.Millisecond)
		}
		callee.send(ok)
		if ack := callee.read("ACK ", 3*time.Second); ack == "" {
			t.Fatalf("copy %d of the 200 OK not acknowledged", i+1)
		} else if header(ack, "CSeq") != strings.Replace(header(inv, "CSeq"), "INVITE", "ACK", 1) {
			t.Errorf("ACK with CSeq %q for INVITE %q", header(ack, "CSeq"), header(inv, "CSeq"))
		}
	}
}
func itoa(n int) string { return strconv.Itoa(n) }
