package pbxsim

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/sipp"
)

// giveUp runs one call of a SIPp caller scenario against p and returns
// what SIPp reported.
func giveUp(t *testing.T, p *PBX, scenario, service string, d time.Duration) sipp.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sipp.Run(ctx, sipp.Options{Scenario: scenario, Remote: p.SIPAddr(), Service: service,
		Calls: 1, Rate: 1, Duration: d, Timeout: 15 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", scenario, err)
	}
	return res
}

// channelsGoneWithin waits until p has no channel, at most max, and
// returns how long that took.
func channelsGoneWithin(t *testing.T, p *PBX, start time.Time, max time.Duration) time.Duration {
	t.Helper()
	for len(p.Channels()) > 0 {
		if time.Since(start) > max {
			t.Fatalf("channels still up %v after the caller gave up: %v", time.Since(start).Round(time.Millisecond), p.Channels())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// hangups is the Hangup events of the capture as "exten cause tech".
func hangups(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Event() == "Hangup" {
			out = append(out, fmt.Sprintf("%s %s/%s", m.Get("CallerIDNum"), m.Get("Cause"), m.Get("TechCause")))
		}
	}
	return out
}

// TestCallerGivesUp: real SIPp callers that give up in each way a phone
// does, against a ringing pbxsim phone (202) or pbxsim's own answer (600).
// Every call must end, with Asterisk's causes, within the timer that
// applies (the test's SIP timers: 64*T1 = 3.2 s).
func TestCallerGivesUp(t *testing.T) {
	needSIPp(t)
	t.Run("CANCEL while ringing", func(t *testing.T) {
		p := startPBX(t, Config{RingTimeout: 10 * time.Second})
		startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
		capt := startCapture(t, p.AMIAddr())
		res := giveUp(t, p, "uac_cancel.xml", "202", 500*time.Millisecond)
		if res.Successful != 1 {
			t.Errorf("SIPp: %+v (200 to the CANCEL and 487 expected)", res)
		}
		channelsGoneWithin(t, p, time.Now(), 2*time.Second)
		msgs := capt.waitFor(t, "two Hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 2 })
		// no_answer_caller_cancel: the caller 127/487, the callee 127/500.
		if count(msgs, "Hangup", "Cause", "127", "TechCause", "487") != 1 || count(msgs, "Hangup", "CallerIDNum", "202", "Cause", "127", "TechCause", "500") != 1 {
			t.Errorf("hangups %v, want the caller 127/487 and 202 127/500", hangups(msgs))
		}
		if count(msgs, "Cdr", "Disposition", "NO ANSWER") != 1 {
			t.Errorf("want one NO ANSWER Cdr")
		}
	})
	for _, c := range []struct{ name, service string }{{"no ACK to pbxsim's answer", "601"}, {"no ACK, callee answered", "202"}} {
		t.Run(c.name, func(t *testing.T) {
			p := startPBX(t, Config{})
			startPhone(t, p, PhoneConfig{Exten: "202"})
			capt := startCapture(t, p.AMIAddr())
			res := giveUp(t, p, "uac_noack.xml", c.service, 0)
			start := time.Now()
			if res.Successful != 1 {
				t.Errorf("SIPp: %+v", res)
			}
			took := channelsGoneWithin(t, p, start, 8*time.Second)
			t.Logf("unacknowledged answer hung up %v after the 200", took)
			if took < 2*time.Second {
				t.Errorf("hung up after %v, before 64*T1 (3.2 s)", took)
			}
			msgs := capt.waitFor(t, "the Cdr", func(m []ami.Message) bool { return count(m, "Cdr") == 1 })
			if count(msgs, "Cdr", "Disposition", "ANSWERED") != 1 {
				t.Errorf("want one ANSWERED Cdr: %v", hangups(msgs))
			}
			// PJSIP ends the session with 408 (chan_pjsip: cause 18, no
			// user responding); the bridge passes the cause to the peer.
			want := []string{"sipp 18/408"}
			if c.service == "202" {
				want = []string{"202 18/", "sipp 18/408"}
			}
			if got := hangups(msgs); !slices.Equal(got, want) && !slices.Equal(got, []string{want[len(want)-1], want[0]}) {
				t.Errorf("hangups %v, want %v", got, want)
			}
			if n := count(msgs, "HangupRequest", "Cause", "18"); n != 1 {
				t.Errorf("%d HangupRequests with cause 18, want 1", n)
			}
		})
	}
	t.Run("vanishes while ringing", func(t *testing.T) {
		p := startPBX(t, Config{RingTimeout: 2 * time.Second})
		startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
		capt := startCapture(t, p.AMIAddr())
		giveUp(t, p, "uac_vanish.xml", "202", 0)
		channelsGoneWithin(t, p, time.Now(), 5*time.Second)
		msgs := capt.waitFor(t, "two Hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 2 })
		if count(msgs, "Hangup", "Cause", "19") != 2 {
			t.Errorf("hangups %v, want both NOANSWER (19) at the ring timeout", hangups(msgs))
		}
	})
	t.Run("times out and aborts", func(t *testing.T) {
		p := startPBX(t, Config{RingTimeout: 8 * time.Second})
		startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
		capt := startCapture(t, p.AMIAddr())
		res := giveUp(t, p, "uac_timeout.xml", "202", 0)
		if res.Failed != 1 {
			t.Errorf("SIPp: %+v (the call should time out)", res)
		}
		took := channelsGoneWithin(t, p, time.Now(), 3*time.Second)
		t.Logf("channels gone %v after SIPp's abort", took)
		msgs := capt.waitFor(t, "two Hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 2 })
		t.Logf("hangups %v", hangups(msgs))
	})
}

// TestByeRetransmitted: a caller whose BYE is retransmitted (pbxsim's 200
// to it lost) gets 200 again from the BYE's transaction, and the call ends
// once: one Hangup (16), one Cdr. Raw SIP over UDP: SIPp answers a
// repeated 200 by resending what followed it, so it cannot play this.
func TestByeRetransmitted(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	conn, to, me := rawSocket(t, p)
	head := func(method, branch string, cseq int, toTag string) string {
		return method + " sip:601@" + p.SIPAddr() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + me + ";branch=" + branch +
			"\r\nFrom: <sip:201@127.0.0.1>;tag=rt1\r\nTo: <sip:601@127.0.0.1>" + toTag + "\r\nCall-ID: byetwice\r\n" +
			fmt.Sprintf("CSeq: %d %s\r\n", cseq, method) + "Contact: <sip:201@" + me + ">\r\nMax-Forwards: 70\r\n"
	}
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	if _, err := conn.WriteTo([]byte(head("INVITE", "z9hG4bK-bt-inv", 1, "")+fmt.Sprintf("Content-Type: application/sdp\r\nContent-Length: %d\r\n\r\n", len(sdp))+sdp), to); err != nil {
		t.Fatal(err)
	}
	tag := ""
	buf := make([]byte, 65535)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for tag == "" {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no 200 to the INVITE: %v", err)
		}
		msg := string(buf[:n])
		if strings.HasPrefix(msg, "SIP/2.0 200") {
			_, rest, _ := strings.Cut(msg, "\r\nTo: ")
			line, _, _ := strings.Cut(rest, "\r\n")
			_, tag, _ = strings.Cut(line, ";tag=")
		}
	}
	toTag := ";tag=" + tag
	conn.WriteTo([]byte(head("ACK", "z9hG4bK-bt-ack", 1, toTag)+"Content-Length: 0\r\n\r\n"), to)
	bye := head("BYE", "z9hG4bK-bt-bye", 2, toTag) + "Content-Length: 0\r\n\r\n"
	for i := range 2 {
		if got := rawSIP(t, conn, to, bye, 3*time.Second); !strings.HasPrefix(got, "SIP/2.0 200") {
			t.Errorf("BYE %d answered %q, want 200", i+1, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	channelsGoneWithin(t, p, time.Now(), 2*time.Second)
	capt.waitFor(t, "the Cdr", func(m []ami.Message) bool { return count(m, "Cdr") >= 1 })
	time.Sleep(300 * time.Millisecond)
	msgs := capt.all()
	if count(msgs, "Hangup") != 1 || count(msgs, "Hangup", "Cause", "16") != 1 || count(msgs, "Cdr") != 1 {
		t.Errorf("hangups %v, %d Cdrs; want one Hangup (16) and one Cdr", hangups(msgs), count(msgs, "Cdr"))
	}
}

// TestPhoneAnsweredAsItCancels: a Phone that gives a call up (its context
// ends while the callee rings) and whose CANCEL crosses the callee's 200
// OK acknowledges the 200 and hangs up with BYE, as RFC 3261 requires,
// for this answer and for the retransmissions of it. A raw UDP server
// plays the PBX that answered.
func TestPhoneAnsweredAsItCancels(t *testing.T) {
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ph, err := NewPhone(PhoneConfig{Exten: "201", Server: srv.LocalAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ph.Run(runCtx) }()
	defer func() { stop(); <-done }()

	callCtx, giveUp := context.WithCancel(context.Background())
	callErr := make(chan error, 1)
	go func() {
		_, err := ph.Call(callCtx, "202")
		callErr <- err
	}()
	read := func(want string) (string, net.Addr) {
		buf := make([]byte, 65535)
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				t.Fatalf("waiting for %s: %v", want, err)
			}
			if msg := string(buf[:n]); strings.HasPrefix(msg, want+" ") {
				return msg, from
			}
		}
	}
	header := func(msg, name string) string {
		for _, l := range strings.Split(msg, "\r\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, name) {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	respond := func(req string, to net.Addr, status, toTag, body string) {
		var b strings.Builder
		b.WriteString("SIP/2.0 " + status + "\r\n")
		for _, h := range []string{"Via", "From", "Call-ID", "CSeq"} {
			b.WriteString(h + ": " + header(req, h) + "\r\n")
		}
		b.WriteString("To: " + header(req, "To") + toTag + "\r\n")
		b.WriteString("Contact: <sip:202@" + srv.LocalAddr().String() + ">\r\n")
		if body != "" {
			b.WriteString("Content-Type: application/sdp\r\n")
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
		if _, err := srv.WriteTo([]byte(b.String()), to); err != nil {
			t.Fatal(err)
		}
	}
	invite, from := read("INVITE")
	respond(invite, from, "180 Ringing", ";tag=pbx1", "")
	giveUp() // the caller gives up: CANCEL
	cancel, _ := read("CANCEL")
	respond(cancel, from, "200 OK", ";tag=pbx1", "")
	// The callee had answered: the 200 crosses the CANCEL (no 487).
	sdp := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	respond(invite, from, "200 OK", ";tag=pbx1", sdp)
	if err := <-callErr; err == nil {
		t.Error("Call succeeded after its context ended")
	}
	ack, _ := read("ACK")
	bye, _ := read("BYE")
	if header(ack, "Call-ID") != header(invite, "Call-ID") || header(bye, "Call-ID") != header(invite, "Call-ID") {
		t.Errorf("ACK/BYE of another call: %q %q", ack, bye)
	}
	respond(bye, from, "200 OK", "", "")
	// A retransmission of that 200 reaches no transaction any more: it is
	// acknowledged again, and its dialog, given up, is ended again.
	respond(invite, from, "200 OK", ";tag=pbx1", sdp)
	read("ACK")
	bye2, _ := read("BYE")
	respond(bye2, from, "200 OK", "", "")
}
