package pbxsim

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestOriginateAutoAnswer: an Originate whose Variable adds Call-Info
// with answer-after=0, or Alert-Info naming auto-answer, to its first
// party's INVITE has that phone answer at once, never ringing (no 180,
// so no Ringing state on its channel); without, the phone rings for its
// RingTime first.
func TestOriginateAutoAnswer(t *testing.T) {
	const ring = 2 * time.Second
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201", RingTime: ring})
	startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	for _, tc := range []struct {
		name, variable string
		auto           bool
	}{
		{"none", "", false},
		{"Call-Info", "PJSIP_HEADER(add,Call-Info)=<sip:127.0.0.1>;answer-after=0", true},
		{"Alert-Info", "PJSIP_HEADER(add,Alert-Info)=<http://127.0.0.1>;info=alert-autoanswer;delay=0,FOO=bar", true},
		{"answer-after=5", "PJSIP_HEADER(add,Call-Info)=<sip:127.0.0.1>;answer-after=5", false},
	} {
		n := len(capt.all())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kv := []string{"Channel", "PJSIP/201", "Exten", "202", "Priority", "1", "CallerID", "201", "Timeout", "30000"}
		if tc.variable != "" {
			kv = append(kv, "Variable", tc.variable)
		}
		start := time.Now()
		res, err := capt.cli.Do(ctx, ami.NewAction("Originate", kv...))
		took := time.Since(start)
		cancel()
		if err != nil || res.Response() != "Success" {
			t.Fatalf("%s: Originate: %v %v", tc.name, res, err)
		}
		msgs := capt.waitFor(t, tc.name+": bridged", func(m []ami.Message) bool { return count(m[n:], "BridgeEnter") == 2 })[n:]
		rang := count(msgs, "Newstate", "CallerIDNum", "201", "ChannelStateDesc", "Ringing") > 0
		if tc.auto && (rang || took >= ring) {
			t.Errorf("%s: 201 rang (%v) or answered after %v, want at once", tc.name, rang, took)
		}
		if !tc.auto && (!rang || took < ring) {
			t.Errorf("%s: 201 rang %v, answered after %v, want a ring of %v", tc.name, rang, took, ring)
		}
		t.Logf("%s: answered after %v", tc.name, took.Round(time.Millisecond))
		for _, c := range p.Channels() {
			capt.cli.Do(context.Background(), ami.NewAction("Hangup", "Channel", c))
		}
		waitNoChannels(t, p)
	}
}
