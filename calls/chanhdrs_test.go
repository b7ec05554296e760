package calls

import (
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// lowerKeys is m with every header key in lower case but the first.
func lowerKeys(m ami.Message) ami.Message {
	hs := m.Headers()
	for i := 1; i < len(hs); i++ {
		hs[i].Key = strings.ToLower(hs[i].Key)
	}
	return ami.NewMessage(hs...)
}

// TestChannelHeadersAnyCase: a call whose events' keys are all in lower
// case (AMI keys are case-insensitive) is what it is in Asterisk's case;
// the dialled channel is found by DestChannel when DestUniqueid is none.
func TestChannelHeadersAnyCase(t *testing.T) {
	ca, cb, ua, ub := "PJSIP/201-00000001", "PJSIP/202-00000002", "1700000000.1", "1700000000.2"
	call := []ami.Message{
		scaleChanEv("Newchannel", ca, "201", "<unknown>", "202", ua, ua, 4),
		scaleChanEv("Newchannel", cb, "202", "<unknown>", "s", ub, ua, 0),
		scaleChanEv("DialBegin", ca, "201", "<unknown>", "202", ua, ua, 4, "DestChannel", cb, "DestUniqueid", "", "DialString", "202"),
		scaleChanEv("DialState", ca, "201", "<unknown>", "202", ua, ua, 4, "DestChannel", cb, "DestUniqueid", ub, "DestChannelState", "5"),
		scaleChanEv("NewConnectedLine", cb, "202", "201", "202", ub, ua, 5),
	}
	publish := func(msgs []ami.Message) (string, *Engine) {
		now := time.Unix(1700000000, 0)
		e := New(Config{Now: func() time.Time { return now }})
		for _, m := range msgs {
			e.Apply(m)
		}
		return string(e.Publish().ExtensionsJSON()), e
	}
	want, e := publish(call)
	if b := e.chans[ub]; b == nil || b.dialledBy != e.chans[ua] || b.state != stateRinging || b.connNum != "201" {
		t.Fatalf("the dialled channel: %+v", b)
	}
	if _, e := publish(call[:4]); e.chans[ub].state != stateRinging {
		t.Errorf("after DialState the dialled channel is in state %d", e.chans[ub].state)
	}
	if !strings.Contains(want, `"counterpartNum":"202"`) {
		t.Fatalf("201 does not call 202: %s", want)
	}
	lower := make([]ami.Message, len(call))
	for i, m := range call {
		lower[i] = lowerKeys(m)
	}
	if got, _ := publish(lower); got != want {
		t.Errorf("keys in lower case:\n%s\nAsterisk's case:\n%s", got, want)
	}
}
