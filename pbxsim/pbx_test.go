package pbxsim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

func TestRegisterAndBasicCall(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	capt.waitFor(t, "registrations", func(m []ami.Message) bool {
		return count(m, "ContactStatus", "ContactStatus", "Created") == 2 && count(m, "ExtensionStatus", "Status", "0") == 2
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	call, err := alice.Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if got := p.Channels(); len(got) != 2 || !strings.HasPrefix(got[0], "PJSIP/201-") || !strings.HasPrefix(got[1], "PJSIP/202-") {
		t.Fatalf("channels %v", got)
	}
	if err := call.Hangup(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 2 && count(m, "Cdr") == 1 })
	waitNoChannels(t, p)
	if n := count(msgs, "Cdr", "Disposition", "ANSWERED"); n != 1 {
		t.Errorf("ANSWERED CDRs = %d", n)
	}
	// Uniqueid scheme and Linkedid.
	var a, b ami.Message
	for _, m := range msgs {
		if m.Event() == "Newchannel" {
			if a.Len() == 0 {
				a = m
			} else {
				b = m
			}
		}
	}
	if b.Get("Linkedid") != a.Get("Uniqueid") || !strings.Contains(a.Get("Uniqueid"), ".") {
		t.Errorf("uniqueid/linkedid: %v / %v", a, b)
	}
}

func TestBusyAndCancelAndUnknown(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", Busy: true})
	startPhone(t, p, PhoneConfig{Exten: "203", NoAnswer: true})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := alice.Call(ctx, "202")
	if !errors.Is(err, ErrCallFailed) || !strings.Contains(err.Error(), "486") {
		t.Fatalf("busy call: %v", err)
	}
	capt.waitFor(t, "busy", func(m []ami.Message) bool {
		return count(m, "DialEnd", "DialStatus", "BUSY") == 1 && count(m, "Hangup") == 2
	})

	cctx, ccancel := context.WithCancel(context.Background())
	go func() {
		capt.waitFor(t, "ringing", func(m []ami.Message) bool { return count(m, "DialState", "DialStatus", "RINGING") == 1 })
		ccancel()
	}()
	_, err = alice.Call(cctx, "203")
	if err == nil {
		t.Fatal("cancelled call answered")
	}
	capt.waitFor(t, "cancel", func(m []ami.Message) bool {
		return count(m, "DialEnd", "DialStatus", "CANCEL") == 1 && count(m, "Hangup") == 4
	})

	_, err = alice.Call(ctx, "999")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown number: %v", err)
	}
	waitNoChannels(t, p)
}

func TestAutoAnswer(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range []string{"600", "205"} { // auto-answer range, unregistered extension
		call, err := alice.Call(ctx, n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if err := call.Hangup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	capt.waitFor(t, "cdr", func(m []ami.Message) bool { return count(m, "Cdr", "Disposition", "ANSWERED") == 2 })
	waitNoChannels(t, p)
}
