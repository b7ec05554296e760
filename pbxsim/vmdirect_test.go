package pbxsim

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestVoicemailDirect: a call to vmu<ext> or *<ext> is answered by the
// mailbox at once, the phone never rings, and the message is counted;
// vmu to an extension without a mailbox is refused.
func TestVoicemailDirect(t *testing.T) {
	exts := []Extension{{"201", "Alice Rossi"}, {"204", "Dave Neri"}, {"205", "Erin"}}
	p := startPBX(t, Config{Extensions: exts, Mailboxes: []string{"204"}})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, target := range []string{"vmu204", "*204"} {
		call, err := alice.Call(ctx, target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		call.Hangup(ctx)
		waitNoChannels(t, p)
		capt.waitFor(t, "message", func(m []ami.Message) bool { return count(m, "MessageWaiting") == i+1 })
	}
	if n := count(capt.all(), "DialBegin"); n != 0 {
		t.Errorf("%d DialBegin: the phone was rung", n)
	}
	if _, err := alice.Call(ctx, "vmu205"); err == nil {
		t.Error("vmu205 answered: 205 has no mailbox")
	}
}
