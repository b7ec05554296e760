package pbxsim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestReferUnknownTarget: a REFER to a number the dialplan cannot reach is
// accepted (202), then fails with NOTIFY 503, and the call goes on; a bad
// Refer-To gets 400.
func TestReferUnknownTarget(t *testing.T) {
	p := startPBX(t, Config{})
	cap := startCapture(t, p.AMIAddr())
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	cap.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if code, err := call.Transfer(ctx, "999"); err != nil || code != 202 {
		t.Fatalf("REFER to 999: %d %v, want 202", code, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(alice.Notifies(), "SIP/2.0 503 Service Unavailable") {
		if time.Now().After(deadline) {
			t.Fatalf("NOTIFYs %q, want 100 Trying then 503", alice.Notifies())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := alice.Notifies(); n[0] != "SIP/2.0 100 Trying" {
		t.Errorf("NOTIFYs %q, want 100 Trying first", n)
	}
	time.Sleep(200 * time.Millisecond)
	if msgs := cap.all(); count(msgs, "BlindTransfer") != 0 || count(msgs, "Hangup") != 0 || len(p.Channels()) != 2 {
		t.Fatalf("the call must go on: channels %v", p.Channels())
	}
	if code, _ := call.Transfer(ctx, ""); code != 400 {
		t.Errorf("REFER to a URI without user: %d, want 400", code)
	}
	call.Hangup(ctx)
	waitNoChannels(t, p)
}

// TestReferThenHangup: a phone that hangs up as soon as it reads that its
// transfer succeeded (here even before answering that NOTIFY) does not end
// the call it transferred: Bob, who called Alice, is put through to Carol,
// and Alice's channel hangs up once.
func TestReferThenHangup(t *testing.T) {
	p := startPBX(t, Config{})
	cap := startCapture(t, p.AMIAddr())
	alice := startPhone(t, p, PhoneConfig{Exten: "201", HangupOnTransfer: true})
	bob := startPhone(t, p, PhoneConfig{Exten: "202"})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bob.Call(ctx, "201"); err != nil {
		t.Fatal(err)
	}
	var call *PhoneCall
	select {
	case call = <-alice.Answered():
	case <-ctx.Done():
		t.Fatal("Alice did not answer")
	}
	cap.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if code, err := call.Transfer(ctx, "203"); err != nil || code != 202 {
		t.Fatalf("REFER to 203: %d %v, want 202", code, err)
	}
	var carolCall *PhoneCall
	select {
	case carolCall = <-carol.Answered():
	case <-ctx.Done():
		t.Fatalf("Carol was not called; NOTIFYs %q", alice.Notifies())
	}
	msgs := cap.waitFor(t, "Bob with Carol", func(m []ami.Message) bool {
		return count(m, "BridgeEnter", "CallerIDNum", "203") == 1
	})
	if n := count(msgs, "BlindTransfer"); n != 1 {
		t.Errorf("%d BlindTransfer, want 1", n)
	}
	if n := count(msgs, "Hangup", "CallerIDNum", "201"); n != 1 {
		t.Errorf("Alice's channel hung up %d times, want 1", n)
	}
	if n := count(msgs, "Hangup", "CallerIDNum", "202"); n != 0 {
		t.Errorf("Bob's channel hung up %d times, want 0 (he talks with Carol)", n)
	}
	if n := alice.Notifies(); !slices.Equal(n, []string{"SIP/2.0 100 Trying", "SIP/2.0 200 OK"}) {
		t.Errorf("NOTIFYs %q, want 100 Trying then 200 OK", n)
	}
	carolCall.Hangup(ctx)
	waitNoChannels(t, p)
}
