package pbxsim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestCalleeHungUpByAMI: a ringing callee's channel hung up through AMI
// (Hangup, Cause 16: what a CTI's hang-up sends) ends the caller's
// unanswered INVITE as Asterisk does: chan_pjsip maps no SIP code to
// cause 16 (hangup_cause2sip answers 0), and res_pjsip_session ends the
// session with its default, 603 Decline. Both channels end with cause 16.
func TestCalleeHungUpByAMI(t *testing.T) {
	p := startPBX(t, Config{RingTimeout: 10 * time.Second})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	conn, to, me := rawSocket(t, p)
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	invite := "INVITE sip:202@" + p.SIPAddr() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + me + ";branch=z9hG4bK-ah-inv" +
		"\r\nFrom: <sip:201@127.0.0.1>;tag=ah1\r\nTo: <sip:202@127.0.0.1>\r\nCall-ID: amihangup\r\n" +
		"CSeq: 1 INVITE\r\nContact: <sip:201@" + me + ">\r\nMax-Forwards: 70\r\n" +
		fmt.Sprintf("Content-Type: application/sdp\r\nContent-Length: %d\r\n\r\n", len(sdp)) + sdp
	if _, err := conn.WriteTo([]byte(invite), to); err != nil {
		t.Fatal(err)
	}
	// Responses to the INVITE, in order, until a final one.
	got := make(chan string, 8)
	go func() {
		defer close(got)
		buf := make([]byte, 65535)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
			if !strings.HasPrefix(line, "SIP/2.0 ") {
				continue // a request (none expected)
			}
			got <- line
			if !strings.HasPrefix(line, "SIP/2.0 1") {
				return
			}
		}
	}()
	msgs := capt.waitFor(t, "the callee ringing", func(m []ami.Message) bool {
		return count(m, "DialState", "DialStatus", "RINGING") == 1
	})
	callee := ""
	for _, m := range msgs {
		if m.Event() == "DialState" {
			callee = m.Get("DestChannel")
		}
	}
	if _, err := capt.cli.Do(ctx5(t), ami.NewAction("Hangup", "Channel", callee, "Cause", "16")); err != nil {
		t.Fatal(err)
	}
	final := ""
	for line := range got {
		final = line
	}
	if final != "SIP/2.0 603 Decline" {
		t.Errorf("the caller's INVITE ended with %q, want SIP/2.0 603 Decline", final)
	}
	// An ACK for the final response, so the transaction ends quietly.
	ack := "ACK sip:202@" + p.SIPAddr() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + me + ";branch=z9hG4bK-ah-inv" +
		"\r\nFrom: <sip:201@127.0.0.1>;tag=ah1\r\nTo: <sip:202@127.0.0.1>\r\nCall-ID: amihangup\r\n" +
		"CSeq: 1 ACK\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
	conn.WriteTo([]byte(ack), to)
	channelsGoneWithin(t, p, time.Now(), 3*time.Second)
	// Dial passes the callee's cause to the caller; DialEnd is app_dial's
	// ast_hangup_cause_to_dial_status of it.
	msgs = capt.waitFor(t, "two Hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 2 })
	if count(msgs, "Hangup", "Cause", "16") != 2 {
		t.Errorf("hangups %v, want both 16", hangups(msgs))
	}
	if count(msgs, "DialEnd", "DialStatus", "NOANSWER") != 1 {
		t.Errorf("want DialEnd NOANSWER")
	}
}
