package pbxsim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// queueStatus runs QueueStatus and returns its items by event name.
func queueStatus(t *testing.T, capt *capture) map[string][]ami.Message {
	t.Helper()
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("QueueStatus", "Queue", "support"))
	if err != nil {
		t.Fatalf("QueueStatus: %v", err)
	}
	out := map[string][]ami.Message{}
	for _, it := range res.Items {
		out[it.Event()] = append(out[it.Event()], it)
	}
	return out
}

func member(items map[string][]ami.Message, iface string) ami.Message {
	for _, m := range items["QueueMember"] {
		if m.Get("Location") == iface {
			return m
		}
	}
	return ami.Message{}
}

// A caller who hangs up while the members ring abandons the queue:
// QueueCallerAbandon + QueueCallerLeave, the members' legs cancelled, no
// channel left, and the engine's queue shows abandoned 1 and nobody
// waiting.
func TestQueueAbandon(t *testing.T) {
	p := startPBX(t, Config{})
	for _, x := range []string{"203", "204"} {
		startPhone(t, p, PhoneConfig{Exten: x, NoAnswer: true})
	}
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
	call, err := trunk.Call(ctx5(t), "600")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "both ringing", func(m []ami.Message) bool { return count(m, "DialState", "DialStatus", "RINGING") == 2 })

	st := queueStatus(t, capt)
	if got := st["QueueParams"][0].Get("Calls"); got != "1" {
		t.Errorf("QueueParams Calls = %s, want 1", got)
	}
	if e := st["QueueEntry"]; len(e) != 1 || e[0].Get("Position") != "1" || e[0].Get("CallerIDNum") != "0612345678" {
		t.Errorf("QueueEntry = %v", e)
	}
	if s := member(st, "PJSIP/203").Get("Status"); s != "6" {
		t.Errorf("203 Status = %s, want 6 (ringing)", s)
	}

	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	msgs := capt.waitFor(t, "cdrs", func(m []ami.Message) bool { return count(m, "Cdr") == 2 })
	if n := count(msgs, "QueueCallerAbandon", "Position", "1", "OriginalPosition", "1"); n != 1 {
		t.Errorf("%d QueueCallerAbandon, want 1", n)
	}
	if n := count(msgs, "QueueCallerLeave", "Count", "0"); n != 1 {
		t.Errorf("%d QueueCallerLeave, want 1", n)
	}
	if n := count(msgs, "AgentConnect"); n != 0 {
		t.Errorf("%d AgentConnect, want 0", n)
	}
	st = queueStatus(t, capt)
	qp := st["QueueParams"][0]
	if qp.Get("Calls") != "0" || qp.Get("Abandoned") != "1" || qp.Get("Completed") != "0" || len(st["QueueEntry"]) != 0 {
		t.Errorf("after abandon: %v, entries %v", qp, st["QueueEntry"])
	}

	v := stateOf(t, capt.all(), recNames, recExts, true)
	for _, x := range recExts {
		if len(v[x].Convs) != 0 || v[x].Status != "online" {
			t.Errorf("%s after abandon: %v", x, v[x])
		}
	}
	want := extView{Status: "completed=0/abandoned=1", Convs: []string{"member:203:0:false:false", "member:204:0:false:false"}}
	if got := v["queue:support"]; got.Status != want.Status || len(got.Convs) != 2 || got.Convs[0] != want.Convs[0] || got.Convs[1] != want.Convs[1] {
		t.Errorf("queue after abandon: %v, want %v", got, want)
	}
}

// rrmemory rings one member at a time, the next one for the next caller;
// QueueStatus counts the calls each member took.
func TestQueueRRMemoryStatus(t *testing.T) {
	p := startPBX(t, Config{QueueStrategy: "rrmemory"})
	phones := map[string]*Phone{}
	for _, x := range []string{"203", "204"} {
		phones[x] = startPhone(t, p, PhoneConfig{Exten: x, RingTime: 50 * time.Millisecond})
	}
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678"})
	for i, agent := range []string{"203", "204"} {
		call, err := trunk.Call(ctx5(t), "600")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-phones[agent].Answered():
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d: %s never answered", i+1, agent)
		}
		capt.waitFor(t, "bridge", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2*(i+1) })
		st := queueStatus(t, capt)
		if m := member(st, "PJSIP/"+agent); m.Get("InCall") != "1" || m.Get("Status") != "2" {
			t.Errorf("call %d: member %s = %v, want in call", i+1, agent, m)
		}
		call.Hangup(ctx5(t))
		waitNoChannels(t, p)
		capt.waitFor(t, "complete", func(m []ami.Message) bool { return count(m, "AgentComplete", "Reason", "caller") == i+1 })
	}
	msgs := capt.all()
	if n := count(msgs, "AgentCalled"); n != 2 {
		t.Errorf("%d AgentCalled, want 2 (one member per caller)", n)
	}
	st := queueStatus(t, capt)
	if qp := st["QueueParams"][0]; qp.Get("Completed") != "2" || qp.Get("Strategy") != "rrmemory" || qp.Get("Calls") != "0" {
		t.Errorf("QueueParams = %v", qp)
	}
	for _, x := range []string{"203", "204"} {
		if m := member(st, "PJSIP/"+x); m.Get("CallsTaken") != "1" || m.Get("LastCall") == "0" || m.Get("InCall") != "0" {
			t.Errorf("member %s = %v, want 1 call taken", x, m)
		}
	}
}

// Nobody answering: the members are given up after the ring time and tried
// again, and the caller leaves the queue (no abandon) at its timeout and
// is hung up.
func TestQueueTimeout(t *testing.T) {
	p := startPBX(t, Config{QueueTimeout: 1500 * time.Millisecond, QueueRingTime: 400 * time.Millisecond, QueueRetry: 200 * time.Millisecond})
	for _, x := range []string{"203", "204"} {
		startPhone(t, p, PhoneConfig{Exten: x, NoAnswer: true})
	}
	capt := startCapture(t, p.AMIAddr())
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678"})
	call, err := trunk.Call(ctx5(t), "600")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-call.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("caller not hung up at the queue timeout")
	}
	waitNoChannels(t, p)
	msgs := capt.waitFor(t, "cdr", func(m []ami.Message) bool { return count(m, "Cdr") >= 1 })
	if n := count(msgs, "QueueCallerLeave"); n != 1 {
		t.Errorf("%d QueueCallerLeave, want 1", n)
	}
	if n := count(msgs, "QueueCallerAbandon"); n != 0 {
		t.Errorf("%d QueueCallerAbandon, want 0", n)
	}
	if n := count(msgs, "AgentRingNoAnswer"); n < 2 {
		t.Errorf("%d AgentRingNoAnswer, want the members retried", n)
	}
	if n := count(msgs, "AgentCalled"); n < 4 {
		t.Errorf("%d AgentCalled, want at least 2 rounds", n)
	}
}

// An originated caller's account code reaches the members it rings as
// app_queue's ring_entry gives it (ast_channel_req_accountcodes_precious):
// each member's channel is created with none, and the snapshot of its
// first Newstate reports it (NewAccountCode after the Newstate, before
// the NewConnectedLine, in manager_channels' monitor order).
func TestQueueMemberAccountCode(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201"})
	carol := startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 100 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Originate", "Channel", "PJSIP/201", "Exten", "600",
		"Account", "600", "Async", "true"))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Originate: %v %v", res, err)
	}
	in := <-carol.Answered()
	msgs := capt.waitFor(t, "member bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	for _, ep := range []string{"203", "204"} {
		var seq []string
		for _, m := range msgs {
			if !strings.HasPrefix(m.Get("Channel"), "PJSIP/"+ep+"-") {
				continue
			}
			switch m.Event() {
			case "Newchannel", "Newstate", "NewAccountCode", "NewConnectedLine":
				seq = append(seq, m.Event()+"="+m.Get("AccountCode")+"/"+m.Get("OldAccountCode"))
			}
		}
		if len(seq) < 4 {
			t.Fatalf("%s: events %v", ep, seq)
		}
		want := []string{"Newchannel=/", "Newstate=/", "NewAccountCode=600/", "NewConnectedLine=600/"}
		if !slices.Equal(seq[:4], want) {
			t.Errorf("%s: events %v, want %v first", ep, seq, want)
		}
	}
	in.Hangup(ctx5(t))
	waitNoChannels(t, p)
}

// TestQueueServiceLevel: with a service level of 1 s, a caller who hangs
// up while the members ring gave up within it, and one answered after
// 2.5 s of ringing was answered beyond it: QueueStatus says
// ServicelevelPerf 0.0 (none of the 1 completed within it) and
// ServicelevelPerf2 50.0 (1 of the 2 completed or abandoned), as
// app_queue computes them (update_queue, record_abandoned); the bridge's
// engine, given the QueueStatus before the calls and the events, counts
// the same.
func TestQueueServiceLevel(t *testing.T) {
	p := startPBX(t, Config{QueueServiceLevel: time.Second})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 2500 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	before, err := capt.cli.Do(ctx5(t), ami.NewAction("QueueStatus", "Queue", "support"))
	if err != nil {
		t.Fatal(err)
	}
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678"})
	call, err := trunk.Call(ctx5(t), "600")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "both ringing", func(m []ami.Message) bool { return count(m, "DialState", "DialStatus", "RINGING") == 2 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	if call, err = trunk.Call(ctx5(t), "600"); err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "answered", func(m []ami.Message) bool { return count(m, "AgentConnect") == 1 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	capt.waitFor(t, "completed", func(m []ami.Message) bool { return count(m, "AgentComplete") == 1 })
	qp := queueStatus(t, capt)["QueueParams"][0]
	if qp.Get("ServiceLevel") != "1" || qp.Get("Completed") != "1" || qp.Get("Abandoned") != "1" ||
		qp.Get("ServicelevelPerf") != "0.0" || qp.Get("ServicelevelPerf2") != "50.0" {
		t.Errorf("QueueParams = %v, want level 1, 1 completed, 1 abandoned, perf 0.0, perf2 50.0", qp)
	}
	eng := calls.New(calls.Config{})
	for _, m := range append(before.Items, capt.all()...) {
		eng.Apply(m)
	}
	if q := eng.Publish().Queues.Get("support"); q.ServiceLevel != 1 || q.Completed != 1 || q.CompletedInSL != 0 || q.Abandoned != 1 || q.AbandonedInSL != 1 {
		t.Errorf("engine: level %d, completed %d (%d within), abandoned %d (%d within); want 1, 1 (0), 1 (1)",
			q.ServiceLevel, q.Completed, q.CompletedInSL, q.Abandoned, q.AbandonedInSL)
	}
}
