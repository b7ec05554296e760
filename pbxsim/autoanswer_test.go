package pbxsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/rest"
)

// TestOriginateAutoAnswer: an Originate whose Variable adds Call-Info
// with answer-after=0, or Alert-Info naming auto-answer, to its first
// party's INVITE has that phone answer at once, never ringing (no 180,
// so no Ringing state on its channel); without, the phone rings for its
// RingTime first.
func TestOriginateAutoAnswer(t *testing.T) {
	const ring = 2 * time.Second
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201", RingTime: ring, UserAgent: "pbxsim-phone 201"})
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

// TestRESTAutoAnswer: with the default table, click-to-call and a pickup
// through the REST API have the user's phone (a pbxsim phone, which the
// table tells with Call-Info) answer at once, never ringing; a user whose
// auto-answer is off has the phone ring for its RingTime first.
func TestRESTAutoAnswer(t *testing.T) {
	const ring = 2 * time.Second
	for _, off := range []bool{false, true} {
		p := startPBX(t, Config{})
		rules, err := rest.ParseAutoAnswerRules("default")
		if err != nil {
			t.Fatal(err)
		}
		b := startBridgeWith(t, p, func(c *rest.Config) {
			c.AutoAnswer = &rest.AutoAnswer{Rules: rules, Off: map[string]bool{"root": off}}
		})
		startPhone(t, p, PhoneConfig{Exten: "201", RingTime: ring, UserAgent: "pbxsim-phone 201"})
		startPhone(t, p, PhoneConfig{Exten: "202", RingTime: 100 * time.Millisecond})
		caller := startPhone(t, p, PhoneConfig{Exten: "203"})
		startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})

		start := time.Now()
		b.post("call", `{"number":"202","endpointId":"201"}`)
		b.waitState("201 talking with 202", func(x map[string]panelExt) bool { return talking(x, "201", "202") })
		checkAutoAnswer(t, b, off, "click-to-call", time.Since(start), ring)
		for _, c := range p.Channels() {
			b.capt.cli.Do(context.Background(), ami.NewAction("Hangup", "Channel", c))
		}
		waitNoChannels(t, p)

		n := len(b.capt.all())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		go caller.Call(ctx, "204")
		b.waitState("204 ringing", func(x map[string]panelExt) bool { return x["204"].Status == "ringing" })
		start = time.Now()
		b.post("pickup_conv", `{"endpointId":"204","destId":"201"}`)
		b.waitState("201 talking with 203", func(x map[string]panelExt) bool { return talking(x, "201", "203") })
		checkAutoAnswer(t, b, off, "pickup", time.Since(start), ring, n)
		cancel()
		for _, c := range p.Channels() {
			b.capt.cli.Do(context.Background(), ami.NewAction("Hangup", "Channel", c))
		}
		waitNoChannels(t, p)
	}
}

// checkAutoAnswer checks that 201 answered at once without ringing (or,
// with auto-answer off, rang first), looking at the events after the
// first from.
func checkAutoAnswer(t *testing.T, b *restBridge, off bool, what string, took, ring time.Duration, from ...int) {
	t.Helper()
	msgs := b.capt.all()
	if len(from) > 0 {
		msgs = msgs[from[0]:]
	}
	rang := false
	for _, m := range msgs {
		if m.Event() == "Newstate" && strings.HasPrefix(m.Get("Channel"), "PJSIP/201-") && m.Get("ChannelStateDesc") == "Ringing" {
			rang = true
		}
	}
	t.Logf("%s (auto-answer off %v): 201 rang %v, talking after %v", what, off, rang, took.Round(time.Millisecond))
	if !off && (rang || took >= ring) {
		t.Errorf("%s: 201 rang (%v) or answered after %v, want at once", what, rang, took)
	}
	if off && (!rang || took < ring) {
		t.Errorf("%s with auto-answer off: 201 rang %v, answered after %v, want a ring of %v", what, rang, took, ring)
	}
}
