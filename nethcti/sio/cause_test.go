package sio

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// TestHangupCause: extenHangup carries the cause of the Hangup that ended
// the conversation, by NethCTI's names (phone-island's operator-busy view
// reads user_busy: src/components/Socket.tsx). Real Asterisk recordings:
// Bob's phone answers 486 (both channels end with 17), a call the caller
// hangs up (16); and the same call with its caller's Hangup carrying a
// cause NethCTI has no name for (no cause field) or none at all.
func TestHangupCause(t *testing.T) {
	withCause := func(cause string) func(ami.Message) ami.Message {
		return func(m ami.Message) ami.Message {
			if m.Event() != "Hangup" || m.Get("Channel") != "PJSIP/201-00000000" {
				return m
			}
			out := ami.NewMessage()
			for _, h := range m.Headers() {
				if h.Key == "Cause" {
					if cause == "" {
						continue
					}
					h.Value = cause
				}
				out = out.Add(h.Key, h.Value)
			}
			return out
		}
	}
	const island = "phone-island src/components/Socket.tsx on('extenHangup')"
	for _, c := range []struct {
		client string // what reads it
		rec    string
		edit   func(ami.Message) ami.Message
		want   string
	}{
		{island + ": the operatorBusy view and its busy tone", "busy_486", nil,
			`{"callerNum":"201","channelExten":"201","cause":"user_busy"}`},
		{island + ": a desk phone's call view closes", "basic_call_caller_hangup", nil,
			`{"callerNum":"201","channelExten":"201","cause":"normal_clearing"}`},
		{island + ": closes, a conference's owner back to waitingConference", "basic_call_caller_hangup", withCause("21"),
			`{"callerNum":"201","channelExten":"201","cause":"call_rejected"}`},
		{"nethcti-server's hangup plugin: a code without a name gives no cause", "basic_call_caller_hangup", withCause("4"),
			`{"callerNum":"201","channelExten":"201"}`},
		{"the same, a Hangup without a Cause", "basic_call_caller_hangup", withCause(""),
			`{"callerNum":"201","channelExten":"201"}`},
	} {
		// The fan-out itself (harness: alice's client a sink), as each
		// AMI message is published.
		h := newHarness(t)
		var alice *client
		for c := range h.got {
			if c.view.Load().user.Username == "alice" {
				alice = c
			}
		}
		for _, m := range loadRecording(t, c.rec) {
			if c.edit != nil {
				m = c.edit(m)
			}
			h.eng.Apply(m)
			h.eng.Publish()
			h.s.pump(h.eng.Feed())
		}
		got := ""
		for _, p := range *h.got[alice] {
			if p.name == "extenHangup" {
				got = string(p.data)
				break
			}
		}
		if got != c.want {
			t.Errorf("%s (%s): extenHangup %s, want %s", c.rec, c.client, got, c.want)
		}
	}
}
