package pbxsim

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestOriginateChanSpy is the REST start_spy and intrude: Carol's phone is
// originated to ChanSpy on Alice's channel; it answers, ChanSpyStart names
// Carol's channel as spyer and Alice's as spyee; when Alice's call ends,
// ChanSpyStop and Carol's phone is hung up (option E).
func TestOriginateChanSpy(t *testing.T) {
	for _, opts := range []string{"qE", "qEB"} {
		t.Run(opts, func(t *testing.T) {
			p := startPBX(t, Config{})
			alice := startPhone(t, p, PhoneConfig{Exten: "201"})
			startPhone(t, p, PhoneConfig{Exten: "202"})
			carol := startPhone(t, p, PhoneConfig{Exten: "203"})
			capt := startCapture(t, p.AMIAddr())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			call, err := alice.Call(ctx, "202")
			if err != nil {
				t.Fatal(err)
			}
			msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
			var own string
			for _, m := range msgs {
				if m.Event() == "Newchannel" && m.Get("CallerIDNum") == "201" {
					own = m.Get("Channel")
				}
			}
			res, err := capt.cli.Do(ctx, ami.NewAction("Originate", "Channel", "PJSIP/203", "Application", "ChanSpy",
				"Data", own+","+opts, "CallerID", "203", "Timeout", "30000", "Async", "true"))
			if err != nil || res.Response() != "Success" {
				t.Fatalf("Originate: %v %v", res, err)
			}
			var spy *PhoneCall
			select {
			case spy = <-carol.Answered():
			case <-time.After(5 * time.Second):
				t.Fatal("Carol's phone was not called")
			}
			msgs = capt.waitFor(t, "ChanSpyStart", func(m []ami.Message) bool { return count(m, "ChanSpyStart") == 1 })
			if count(msgs, "ChanSpyStart", "SpyeeChannel", own, "SpyerCallerIDNum", "203") != 1 {
				t.Errorf("ChanSpyStart does not name spyer 203 and spyee %s", own)
			}
			call.Hangup(ctx)
			capt.waitFor(t, "ChanSpyStop", func(m []ami.Message) bool { return count(m, "ChanSpyStop", "SpyeeChannel", own) == 1 })
			select {
			case <-spy.Done():
			case <-time.After(5 * time.Second):
				t.Error("the spying phone was not hung up when the spied call ended")
			}
			waitNoChannels(t, p)
		})
	}
}
