package pbxsim

import (
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// ringGroupTalking starts the ring group call of ringgroup_local (Alice
// 201 calls 610, Carol 203 answers through Local/203@from-internal/n)
// and gives the PBX, the capture, Alice's call and the channel names by
// endpoint prefix.
func ringGroupTalking(t *testing.T) (*PBX, *capture, *PhoneCall, map[string]string) {
	t.Helper()
	p := freepbxPBX(t)
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 100 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "610")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
	names := map[string]string{}
	for _, n := range p.Channels() {
		if strings.HasPrefix(n, "Local/") {
			names["Local"+n[len(n)-2:]] = n // ;1, ;2
			continue
		}
		names[n[:strings.LastIndexByte(n, '-')]] = n
	}
	return p, capt, call, names
}

// parkedCall checks the stream after a Park of parkee through the Local
// pair: one ParkedCall for it, parked by parker, and every other channel
// hung up; the engine shows the space taken by the parkee's number.
func parkedCall(t *testing.T, p *PBX, capt *capture, ch map[string]string, parkee, parker, num string) {
	t.Helper()
	got := capt.waitFor(t, "the others' hangups", func(m []ami.Message) bool {
		n := 0
		for _, x := range []string{"PJSIP/201", "Local;1", "Local;2", "PJSIP/203"} {
			n += count(m, "Hangup", "Channel", ch[x])
		}
		return n == 3
	})
	if n := count(got, "ParkedCall", "ParkeeChannel", parkee, "ParkerDialString", parker, "ParkingSpace", "701"); n != 1 {
		t.Errorf("%d ParkedCall of %s by %s in 701, want 1", n, parkee, parker)
	}
	if chans := p.Channels(); len(chans) != 1 || chans[0] != parkee {
		t.Errorf("channels after the park %v, want only %s", chans, parkee)
	}
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
	eng.SetLink(calls.LinkLive)
	for _, m := range got {
		eng.Apply(m)
	}
	if js := string(eng.Publish().ParkingsJSON()); !strings.Contains(js, `"701":{"parking":"701"`) || !strings.Contains(js, `"num":"`+num+`"`) {
		t.Errorf("parkings %s: want 701 holding %s", js, num)
	}
}

// TestParkLocalPhone: Alice parks Carol, who answered the ring group
// through a Local pair (the bridge's Park: Channel her phone,
// TimeoutChannel Alice's). Carol alone moves into the lot; ;2, left
// alone in her bridge, hangs up, ;1 with it, and Alice, whose bridge
// dissolves. Dialling 701 then retrieves Carol.
func TestParkLocalPhone(t *testing.T) {
	p, capt, _, ch := ringGroupTalking(t)
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Park", "Channel", ch["PJSIP/203"], "TimeoutChannel", ch["PJSIP/201"]))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Park: %v %v", res.Message, err)
	}
	parkedCall(t, p, capt, ch, ch["PJSIP/203"], "PJSIP/201", "203")
	bob := startPhone(t, p, PhoneConfig{Exten: "205"})
	call, err := bob.Call(ctx5(t), "701")
	if err != nil {
		t.Fatal(err)
	}
	got := capt.waitFor(t, "the retrieval", func(m []ami.Message) bool { return count(m, "UnParkedCall") == 1 })
	if n := count(got, "UnParkedCall", "ParkeeChannel", ch["PJSIP/203"]); n != 1 {
		t.Errorf("no UnParkedCall of Carol's channel")
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
}

// TestParkLocalCaller: Carol parks Alice (Channel Alice's, TimeoutChannel
// Carol's): Alice moves into the lot, ;1 hangs up, ;2 and Carol.
func TestParkLocalCaller(t *testing.T) {
	p, capt, call, ch := ringGroupTalking(t)
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Park", "Channel", ch["PJSIP/201"], "TimeoutChannel", ch["PJSIP/203"]))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Park: %v %v", res.Message, err)
	}
	parkedCall(t, p, capt, ch, ch["PJSIP/201"], "PJSIP/203", "201")
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	capt.waitFor(t, "ParkedCallGiveUp", func(m []ami.Message) bool { return count(m, "ParkedCallGiveUp") == 1 })
}

// TestParkLocalHalf: Park of a Local half is refused (not simulated).
func TestParkLocalHalf(t *testing.T) {
	_, capt, _, ch := ringGroupTalking(t)
	var half string
	for k, v := range ch {
		if strings.HasPrefix(k, "Local/") {
			half = v
		}
	}
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Park", "Channel", half))
	if err == nil || res.Response() != "Error" {
		t.Errorf("Park of %s: %v %v, want an error", half, res.Message, err)
	}
}
