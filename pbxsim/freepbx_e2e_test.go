package pbxsim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// End to end on the freepbx plan: calls.Engine fed with pbxsim's stream
// (the devices read from pbxsim's own AstDB, as the bridge reads them at
// a resync) shows what the third set's .md give as the truth, and the
// same as when it is fed with the recording, at the same moments.

// fpView is, per extension, its conversations as
// "direction:counterpart:connected", with ":queue=<through>/<id>" for a
// call through a queue.
type fpView map[string][]string

// engineView feeds msgs to a fresh engine and gives exts' conversations.
func engineView(t *testing.T, msgs []ami.Message, devices map[string]string, exts []string) fpView {
	t.Helper()
	eng := calls.New(calls.Config{Devices: devices, Trunks: []string{"trunk"}})
	eng.SetLink(calls.LinkLive)
	for _, m := range msgs {
		eng.Apply(m)
	}
	var st struct {
		Extensions map[string]struct {
			Status        string `json:"status"`
			Conversations map[string]struct {
				Direction      string `json:"direction"`
				CounterpartNum string `json:"counterpartNum"`
				Connected      bool   `json:"connected"`
				ThroughQueue   bool   `json:"throughQueue"`
				QueueID        string `json:"queueId"`
			} `json:"conversations"`
		} `json:"extensions"`
	}
	snap := eng.Publish()
	if err := json.Unmarshal(snap.StateJSON(), &st); err != nil {
		t.Fatal(err)
	}
	v := fpView{}
	for _, x := range exts {
		e := st.Extensions[x]
		var cs []string
		for _, c := range e.Conversations {
			s := fmt.Sprintf("%s:%s:%v", c.Direction, c.CounterpartNum, c.Connected)
			if c.ThroughQueue || c.QueueID != "" {
				s += fmt.Sprintf(":queue=%v/%s", c.ThroughQueue, c.QueueID)
			}
			cs = append(cs, s)
		}
		slices.Sort(cs)
		v[x] = cs
	}
	return v
}

// pbxDevices reads the DEVICE family of p's AstDB as the bridge does
// (DBGetTree): device -> user, a user's own endpoint left out.
func pbxDevices(t *testing.T, capt *capture) map[string]string {
	t.Helper()
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("DBGetTree", "Family", "DEVICE"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range res.Items {
		parts := strings.Split(it.Get("Key"), "/") // /DEVICE/<dev>/user
		if len(parts) == 4 && parts[3] == "user" && parts[2] != it.Get("Val") {
			out[parts[2]] = it.Get("Val")
		}
	}
	return out
}

// fpMoment is a moment of a scenario (just before the n-th event ev)
// and what the engine must show then, by extension.
type fpMoment struct {
	ev   string
	n    int
	want fpView
}

// checkEngine checks each moment on both streams: the hand-written truth,
// and the same view from the recording as from pbxsim.
func checkEngine(t *testing.T, name string, rec, got []ami.Message, devices map[string]string, moments []fpMoment) {
	t.Helper()
	for _, m := range moments {
		var exts []string
		for x := range m.want {
			exts = append(exts, x)
		}
		slices.Sort(exts)
		rv := engineView(t, upTo(rec, m.ev, m.n), devices, exts)
		gv := engineView(t, upTo(got, m.ev, m.n), devices, exts)
		if !reflect.DeepEqual(rv, m.want) {
			t.Errorf("%s before %s #%d, recording: %v, want %v", name, m.ev, m.n, rv, m.want)
		}
		if !reflect.DeepEqual(gv, m.want) {
			t.Errorf("%s before %s #%d, pbxsim: %v, want %v", name, m.ev, m.n, gv, m.want)
		}
	}
}

// TestFreePBXEngineRingGroup: the ring group call rings 202, 203, 204 for
// Alice, whose call names the group she called (610); answered by Carol it is one conversation 201 <-> 203 (the Local
// pair followed through), ringgroup_local.md moments 2 and 3.
func TestFreePBXEngineRingGroup(t *testing.T) {
	got, capt := runRingGroup(t)
	rec := readAMI3(t, "ringgroup_local")
	devs := pbxDevices(t, capt)
	checkEngine(t, "ringgroup_local", rec, got, devs, []fpMoment{
		{"DialEnd", 1, fpView{"201": {"out:610:false"}, "202": {"in:201:false"}, "203": {"in:201:false"}, "204": {"in:201:false"}}},
		{"HangupRequest", 3, fpView{"201": {"out:203:true"}, "203": {"in:201:true"}, "202": nil, "204": nil}},
	})
}

// TestFreePBXEngineQueueLocal: the queue call answered through Carol's
// Local member names the queue and Carol (queue_local_members.md moment
// 4: Mario Rossi 0612345678 <-> Carol 203 through queue 620).
func TestFreePBXEngineQueueLocal(t *testing.T) {
	got, capt := runQueueLocal(t)
	rec := readAMI3(t, "queue_local_members")
	devs := pbxDevices(t, capt)
	checkEngine(t, "queue_local_members", rec, got, devs, []fpMoment{
		{"AgentComplete", 1, fpView{"203": {"in:0612345678:true:queue=true/620"}, "202": nil}},
	})
}

// TestFreePBXEngineDevices: the call answered on Alice's second device
// is Alice's (multi_device_user.md moments 4 and 8), both ways.
func TestFreePBXEngineDevices(t *testing.T) {
	got, capt := runMultiDevice(t)
	rec := readAMI3(t, "multi_device_user")
	devs := pbxDevices(t, capt)
	if devs["91201"] != "201" {
		t.Fatalf("pbxsim's DEVICE tree %v, want 91201 -> 201", devs)
	}
	checkEngine(t, "multi_device_user", rec, got, devs, []fpMoment{
		{"HangupRequest", 1, fpView{"201": {"in:202:true"}, "202": {"out:201:true"}, "91201": nil}},
		{"HangupRequest", 2, fpView{"201": {"out:203:true"}, "203": {"in:201:true"}, "91201": nil}},
	})
}

// TestFreePBXOutboundRoute: Alice dials an outside number: it leaves on
// the trunk from macro-dialout-trunk (the trunk leg's caller number is
// "s"), the caller shows the route's caller ID, and the engine's
// counterpart is the number dialled.
func TestFreePBXOutboundRoute(t *testing.T) {
	p := freepbxPBX(t)
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "0612345678")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if v := engineView(t, msgs, nil, []string{"201"}); !reflect.DeepEqual(v["201"], []string{"out:0612345678:true"}) {
		t.Errorf("201's conversations %v, want out to 0612345678, connected", v["201"])
	}
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
	eng.SetLink(calls.LinkLive)
	for _, m := range msgs {
		eng.Apply(m)
	}
	for id, cv := range eng.Publish().Extensions.Get("201").Conversations {
		if got := cv.Extras().PresentedNum; got != "0612340201" {
			t.Errorf("201's call %s presents %q, want the route's caller ID 0612340201", id, got)
		}
	}
	var trunkCID, dialString, ownCID string
	for _, m := range msgs {
		switch {
		case m.Event() == "Newchannel" && strings.HasPrefix(m.Get("Channel"), "PJSIP/trunk-"):
			trunkCID = m.Get("CallerIDNum")
		case m.Event() == "DialBegin":
			dialString = m.Get("DialString")
		case m.Event() == "NewCallerid" && strings.HasPrefix(m.Get("Channel"), "PJSIP/201-"):
			ownCID = m.Get("CallerIDNum")
		}
	}
	if trunkCID != "s" || dialString != "0612345678@trunk" || ownCID != "0612340201" {
		t.Errorf("trunk leg caller %q, DialString %q, caller's outbound CID %q; want s, 0612345678@trunk, 0612340201", trunkCID, dialString, ownCID)
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	got := capt.waitFor(t, "the Cdr", func(m []ami.Message) bool { return count(m, "Cdr") == 1 })
	for _, m := range got {
		if m.Event() == "Cdr" && (m.Get("Destination") != "0612345678" || m.Get("Disposition") != "ANSWERED") {
			t.Errorf("Cdr Destination %q Disposition %q, want 0612345678 ANSWERED", m.Get("Destination"), m.Get("Disposition"))
		}
	}
}

// TestRingGroupOptimized: without /n (RingGroupOptimize) the answered
// member's Local pair optimises itself away as core_unreal does by
// default: LocalOptimizationBegin with the caller as source, the caller
// swapped into the phone's bridge in ;2's place (SwapUniqueid), End, the
// pair hung up; Alice and Carol then talk in one bridge, an ordinary
// two-party call.
func TestRingGroupOptimized(t *testing.T) {
	p := startPBX(t, Config{Plan: PlanFreePBX, RingGroupOptimize: true, RingTimeout: 5 * time.Second})
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 200 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "610")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "optimised", func(m []ami.Message) bool { return count(m, "LocalOptimizationEnd") == 1 && count(m, "Hangup") == 8 })
	var l2uid, swap, source string
	for _, m := range msgs {
		switch m.Event() {
		case "Newchannel":
			if strings.HasPrefix(m.Get("Channel"), "Local/203@") && strings.HasSuffix(m.Get("Channel"), ";2") {
				l2uid = m.Get("Uniqueid")
			}
		case "LocalBridge":
			if m.Get("LocalOptimization") != "Yes" {
				t.Errorf("LocalBridge LocalOptimization %q, want Yes", m.Get("LocalOptimization"))
			}
		case "LocalOptimizationBegin":
			source = m.Get("SourceChannel")
		case "BridgeEnter":
			if s := m.Get("SwapUniqueid"); s != "" {
				swap = s
			}
		}
	}
	if swap == "" || swap != l2uid || !strings.HasPrefix(source, "PJSIP/201-") {
		t.Errorf("swap %q (want ;2's %q), source %q (want PJSIP/201-...)", swap, l2uid, source)
	}
	chans := p.Channels()
	if len(chans) != 2 || !strings.HasPrefix(chans[0], "PJSIP/201-") || !strings.HasPrefix(chans[1], "PJSIP/203-") {
		t.Errorf("channels after the optimisation %v, want PJSIP/201 and PJSIP/203", chans)
	}
	if v := engineView(t, msgs, nil, []string{"201", "203"}); !reflect.DeepEqual(v, fpView{"201": {"out:203:true"}, "203": {"in:201:true"}}) {
		t.Errorf("engine: %v, want 201 out to 203 and 203 in from 201, connected", v)
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
}

// TestPickupQueueLocalMember: a queue call ringing a Local member's
// phone is picked up (**203): Pickup names the phone's channel, the
// member's pair and phone hang up (26), the caller leaves the queue and
// talks with the picker.
func TestPickupQueueLocalMember(t *testing.T) {
	p := startPBX(t, Config{Plan: PlanFreePBX, QueueMembers: []string{"203"}})
	startPhone(t, p, PhoneConfig{Exten: "203", NoAnswer: true})
	picker := startPhone(t, p, PhoneConfig{Exten: "205"})
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678"})
	call, err := trunk.Call(ctx5(t), "0612340620")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "member ringing", func(m []ami.Message) bool { return count(m, "Newstate", "ChannelState", "5") == 2 })
	var phone string
	for _, m := range msgs {
		if m.Event() == "Newchannel" && strings.HasPrefix(m.Get("Channel"), "PJSIP/203-") {
			phone = m.Get("Channel")
		}
	}
	pc, err := picker.Call(ctx5(t), "**203")
	if err != nil {
		t.Fatal(err)
	}
	msgs = capt.waitFor(t, "picked up", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if count(msgs, "Pickup", "TargetChannel", phone) != 1 || count(msgs, "Hangup", "Channel", phone, "Cause", "26") != 1 ||
		count(msgs, "QueueCallerLeave") != 1 || count(msgs, "BridgeEnter", "CallerIDNum", "205") != 1 {
		t.Errorf("want Pickup of %s, it hung up (26), the caller out of the queue and bridged with 205", phone)
	}
	if got := p.Channels(); len(got) != 2 {
		t.Errorf("channels after the pickup %v, want the caller and the picker", got)
	}
	pc.Hangup(ctx5(t))
	<-call.Done()
	waitNoChannels(t, p)
}

// TestDeviceOnlyRegistered: a user whose own phone is not registered is
// reached on its registered device alone (Dial of PJSIP/91201), and the
// call is the user's.
func TestDeviceOnlyRegistered(t *testing.T) {
	p := freepbxPBX(t)
	startPhone(t, p, PhoneConfig{Exten: "91201"})
	bob := startPhone(t, p, PhoneConfig{Exten: "202"})
	capt := startCapture(t, p.AMIAddr())
	call, err := bob.Call(ctx5(t), "201")
	if err != nil {
		t.Fatal(err)
	}
	msgs := capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	if count(msgs, "Newchannel", "CallerIDNum", "201") != 1 || count(msgs, "DialEnd", "DialStatus", "ANSWER") != 1 {
		t.Error("want one device channel (caller ID 201) dialled and answered")
	}
	if v := engineView(t, msgs, map[string]string{"91201": "201"}, []string{"201", "202"}); !reflect.DeepEqual(v, fpView{"201": {"in:202:true"}, "202": {"out:201:true"}}) {
		t.Errorf("engine: %v, want 201 in from 202 and 202 out to 201, connected", v)
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
}
