package calls

import (
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// deviceTree is FreePBX's DEVICE family as the PBX of the third set
// holds it (testdata/ami3-astdb.txt), answered to DBGetTree.
func deviceTree() (ami.Message, ami.Response) {
	action := ami.NewAction(ami.ActionDBGetTree, "Family", "DEVICE")
	var items []ami.Message
	for _, kv := range [][2]string{
		{"201", "201"}, {"91201", "201"}, {"92201", "201"}, {"202", "202"},
		{"203", "203"}, {"204", "204"}, {"205", "205"},
	} {
		items = append(items, ev(ami.EventDBGetTreeResponse, "Key", "/DEVICE/"+kv[0]+"/user", "Val", kv[1]))
	}
	return action, ami.Response{Items: items}
}

// TestDevicesFromAstDB: the engine learns whose device 91201 is from the
// AstDB (DEVICE/91201/user = 201) when the call is already up, as a
// resync's follow-ups do: the call moves to Alice 201, and Bob sees
// Alice 201, not an extension 91201. Without the AstDB answer, the call
// is 91201's.
func TestDevicesFromAstDB(t *testing.T) {
	rec := loadRecording(t, "multi_device_user")
	var sc StreamClock
	e := New(testConfig(sc.Now))
	e.SetLink(LinkLive)
	for _, m := range rec.msgs {
		sc.Observe(m)
		e.Apply(m)
		if m.Event() == "BridgeEnter" && m.Get("Channel") == "PJSIP/202-00000000" {
			break
		}
	}
	s := e.Publish()
	const id = "PJSIP/202-00000000>PJSIP/91201-00000002"
	if _, ok := s.Extensions.Get("91201").Conversations[id]; !ok {
		t.Fatalf("before the AstDB is read the call should be 91201's: %+v", s.Extensions.Get("91201"))
	}
	action, resp := deviceTree()
	for _, it := range resp.Items {
		e.Apply(it)
	}
	e.ApplyAnswer(action, resp, nil)
	s = e.Publish()
	alice, dev, bob := s.Extensions.Get("201"), s.Extensions.Get("91201"), s.Extensions.Get("202")
	if cv, ok := alice.Conversations[id]; !ok || !cv.Connected || cv.CounterpartNum != "202" {
		t.Errorf("201's conversations %+v, want %s connected with 202", alice.Conversations, id)
	}
	if len(dev.Conversations) != 0 || dev.Name != "Alice Rossi" {
		t.Errorf("device 91201: %d conversations, name %q; want none, Alice Rossi", len(dev.Conversations), dev.Name)
	}
	if cv := bob.Conversations[id]; cv.CounterpartNum != "201" || cv.CounterpartName != "Alice Rossi" {
		t.Errorf("Bob's counterpart %q %q, want 201 Alice Rossi", cv.CounterpartNum, cv.CounterpartName)
	}
	if alice.Status != "busy" {
		t.Errorf("Alice's status %q while she talks on 91201, want busy", alice.Status)
	}
	// A tree that no longer lists 91201: it is no one's device again.
	resp.Items = resp.Items[:1]
	e.ApplyAnswer(action, resp, nil)
	s = e.Publish()
	if _, ok := s.Extensions.Get("91201").Conversations[id]; !ok {
		t.Errorf("91201 left out of the tree: its call should be its own again: %+v", s.Extensions.Get("91201"))
	}
}

// TestUserStatusFromDevices: a user's status joins her devices' states as
// her hint does (ast_devstate_aggregate): ringing on one device and in
// use on another is busy_ringing; a device offline counts for nothing.
func TestUserStatusFromDevices(t *testing.T) {
	for _, tc := range []struct{ own, dev, want string }{
		{"online", "online", "online"},
		{"online", "busy", "busy"},
		{"ringing", "busy", "busy_ringing"},
		{"offline", "ringing", "ringing"},
		{"offline", "offline", "offline"},
		{"onhold", "online", "onhold"},
		{"busy_ringing", "online", "busy_ringing"},
	} {
		e := New(Config{Devices: map[string]string{"91201": "201"}})
		e.ensureExt("201").status = tc.own
		e.ensureExt("91201").status = tc.dev
		if got := e.Publish().Extensions.Get("201").Status; got != tc.want {
			t.Errorf("201 %s, 91201 %s: user status %q, want %q", tc.own, tc.dev, got, tc.want)
		}
	}
}

// TestDeviceRefused: a device cannot belong to a device, nor be a
// user's own endpoint; bad values are counted, never state.
func TestDeviceRefused(t *testing.T) {
	e := New(Config{Devices: map[string]string{"91201": "201"}})
	e.setDevice("99", "91201")  // a device's device
	e.setDevice("201", "202")   // a user cannot be someone's device
	e.setDevice("9x1", "201")   // not an endpoint FreePBX writes
	e.setDevice("203", "203")   // a user's own endpoint: no device
	e.setDevice("204", "a\r\n") // junk
	if len(e.devUser) != 1 || e.devUser["91201"] != "201" {
		t.Errorf("devices %v, want only 91201 -> 201", e.devUser)
	}
	if got := e.Stats().BadValues; got != 4 {
		t.Errorf("BadValues = %d, want 4", got)
	}
}

// TestOutboundRouteCounterpart: FreePBX dials an outbound route's trunk
// from macro-dialout-trunk, a subroutine at extension "s", so Asterisk
// gives the trunk leg "s" as caller number, and the caller's connected
// line becomes "s" when the far end answers (asterisk-conf of the third
// set: outrt-1, macro-dialout-trunk). The caller's call shows the number
// dialled, never "s"; the trunk's shows the caller's extension.
func TestOutboundRouteCounterpart(t *testing.T) {
	now := time.Unix(1796671175, 0)
	e := New(Config{Now: func() time.Time { return now }, Trunks: []string{"trunk"}})
	e.SetLink(LinkLive)
	alice := []string{"Channel", "PJSIP/201-00000020", "Uniqueid", "1796671175.80", "Linkedid", "1796671175.80"}
	trunk := []string{"Channel", "PJSIP/trunk-00000021", "Uniqueid", "1796671175.81", "Linkedid", "1796671175.80"}
	with := func(base []string, kv ...string) []string { return append(append([]string{}, base...), kv...) }
	for _, m := range []ami.Message{
		ev("Newchannel", with(alice, "ChannelState", "4", "CallerIDNum", "201", "CallerIDName", "Alice Rossi", "Exten", "0612345678", "Context", "from-internal")...),
		ev("NewCallerid", with(alice, "ChannelState", "4", "CallerIDNum", "0612340201", "CallerIDName", "Alice Rossi", "Exten", "s", "Context", "macro-outbound-callerid")...),
		ev("Newchannel", with(trunk, "ChannelState", "0", "CallerIDNum", "s", "CallerIDName", "", "ConnectedLineNum", "0612340201", "Exten", "s", "Context", "from-pstn")...),
		ev("DialBegin", "Channel", "PJSIP/201-00000020", "Uniqueid", "1796671175.80", "DestChannel", "PJSIP/trunk-00000021", "DestUniqueid", "1796671175.81", "DialString", "0612345678@trunk"),
		ev("Newstate", with(trunk, "ChannelState", "6", "CallerIDNum", "s")...),
		ev("NewConnectedLine", with(alice, "ChannelState", "4", "ConnectedLineNum", "s")...),
		ev("DialEnd", "Channel", "PJSIP/201-00000020", "Uniqueid", "1796671175.80", "DestChannel", "PJSIP/trunk-00000021", "DestUniqueid", "1796671175.81", "DialStatus", "ANSWER"),
		ev("BridgeCreate", "BridgeUniqueid", "b1", "BridgeType", "basic"),
		ev("BridgeEnter", with(trunk, "BridgeUniqueid", "b1", "ChannelState", "6")...),
		ev("BridgeEnter", with(alice, "BridgeUniqueid", "b1", "ChannelState", "6")...),
	} {
		now = now.Add(100 * time.Millisecond)
		e.Apply(m)
	}
	s := e.Publish()
	const id = "PJSIP/201-00000020>PJSIP/trunk-00000021"
	cv, ok := s.Extensions.Get("201").Conversations[id]
	if !ok || !cv.Connected || cv.CounterpartNum != "0612345678" || cv.Direction != "out" || !cv.ThroughTrunk {
		t.Errorf("201's call %+v, want %s connected out to 0612345678 through the trunk", cv, id)
	}
	tcv, ok := s.Trunks.Get("trunk").Conversations.Lookup(id)
	if !ok || tcv.CounterpartNum != "201" || tcv.CounterpartName != "Alice Rossi" {
		t.Errorf("the trunk's call %+v, want its counterpart 201 Alice Rossi", tcv)
	}
	// The route's caller ID is Alice's own number on this call; the
	// trunk's conversation presents nothing of its own.
	if got := cv.Extras().PresentedNum; got != "0612340201" {
		t.Errorf("201's presented number %q, want the route's caller ID 0612340201", got)
	}
	if got := tcv.Extras().PresentedNum; got != "" {
		t.Errorf("the trunk's presented number %q, want none", got)
	}
	if js := string(s.StateJSON()); !strings.Contains(js, `"throughTrunk":true,"presentedNum":"0612340201"`) || strings.Count(js, "presentedNum") != 1 {
		t.Errorf("state JSON %s: want presentedNum once, on Alice's call", js)
	}
}

// TestPresentedNumInternal: a call between extensions presents each
// party's own number, so neither conversation has a presentedNum, even
// when the caller's caller ID is a device's user (91201 calls as 201).
func TestPresentedNumInternal(t *testing.T) {
	s := replayUntil(t, "multi_device_user", "BridgeEnter Channel=PJSIP/91201-00000003")
	for _, x := range []string{"201", "203"} {
		for id, cv := range s.Extensions.Get(x).Conversations {
			if cv.Extras().PresentedNum != "" {
				t.Errorf("%s's call %s presents %q, want nothing", x, id, cv.Extras().PresentedNum)
			}
		}
	}
	if strings.Contains(string(s.StateJSON()), "presentedNum") {
		t.Errorf("internal call: presentedNum in the state JSON")
	}
}

// replayUntil replays a recording of the third set up to and including
// the first message matching spec, then applies extra, and publishes.
func replayUntil(t *testing.T, name, spec string, extra ...ami.Message) *Snapshot {
	t.Helper()
	rec := loadRecording(t, name)
	var sc StreamClock
	e := New(recordingConfig(name, sc.Now))
	e.SetLink(LinkLive)
	found := false
	for _, m := range rec.msgs {
		sc.Observe(m)
		e.Apply(m)
		if matches(m, spec) {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("%s: no %q", name, spec)
	}
	for _, m := range extra {
		e.Apply(m)
	}
	return e.Publish()
}

// TestDialplanRecording: FreePBX starts MixMonitor from the dialplan
// (sub-record-check), on the caller's channel for a call to a user, on
// the member's Local half for a ring group: both parties' calls are
// recorded. (MixMonitorStart carries the channel headers, EVENTS.md of
// the third set; its recording is not among the shared ones, so the
// event is added to the recordings where the dialplan would start it.)
func TestDialplanRecording(t *testing.T) {
	mix := func(ch, uid, linked string) ami.Message {
		return ev("MixMonitorStart", "Channel", ch, "ChannelState", "6", "ChannelStateDesc", "Up", "Uniqueid", uid, "Linkedid", linked)
	}
	s := replayUntil(t, "multi_device_user", "BridgeEnter Channel=PJSIP/91201-00000003",
		mix("PJSIP/91201-00000003", "1796670954.5", "1796670954.5"))
	const id = "PJSIP/91201-00000003>PJSIP/203-00000004"
	if a, c := s.Extensions.Get("201").Conversations[id], s.Extensions.Get("203").Conversations[id]; a.Recording != "true" || c.Recording != "true" {
		t.Errorf("caller's MixMonitor: Alice's call recording %q, Carol's %q; want both true", a.Recording, c.Recording)
	}
	s = replayUntil(t, "ringgroup_local", "BridgeEnter Channel=PJSIP/201-00000005",
		mix("Local/203@from-internal-00000001;2", "1796670971.12", "1796670971.8"))
	const rid = "PJSIP/201-00000005>PJSIP/203-00000008"
	if a, c := s.Extensions.Get("201").Conversations[rid], s.Extensions.Get("203").Conversations[rid]; a.Recording != "true" || c.Recording != "true" {
		t.Errorf("member's MixMonitor: Alice's call recording %q, Carol's %q; want both true", a.Recording, c.Recording)
	}
}

// TestQueueLocalMemberRinging: the phone of a queue's Local member rings
// for the queue: its extenRinging names the queue.
func TestQueueLocalMemberRinging(t *testing.T) {
	rec := loadRecording(t, "queue_local_members")
	var sc StreamClock
	e := New(recordingConfig(rec.name, sc.Now))
	e.SetLink(LinkLive)
	rang := map[string]string{}
	var last uint64
	for _, m := range rec.msgs {
		sc.Observe(m)
		e.Apply(m)
		s := e.Publish()
		cs, _ := e.Feed().Since(last)
		last = s.Seq
		for _, c := range cs {
			if c.Type == ExtenRinging {
				rang[c.Key] = string(c.Data)
			}
		}
	}
	for _, x := range []string{"202", "203"} {
		if !strings.Contains(rang[x], `"queue":"620"`) || !strings.Contains(rang[x], `"callerNum":"0612345678"`) {
			t.Errorf("%s rang %s; want the queue 620 and the caller 0612345678", x, rang[x])
		}
	}
}

// TestParkedAtKeptByList: ParkedCalls gives a parked call's duration in
// whole seconds (park_by_transfer: 2 at t=7.65 for a call parked at
// t=6.13), so the list's parkedAt is up to a second early; the live
// ParkedCall's time stands.
func TestParkedAtKeptByList(t *testing.T) {
	rec := loadRecording(t, "park_by_transfer")
	times := loadTiming(t, rec)
	i := 0
	e := New(recordingConfig(rec.name, func() time.Time { return times[i] }))
	e.SetLink(LinkLive)
	var parked int64
	for i = range rec.msgs {
		m := rec.msgs[i]
		e.Apply(m)
		if m.Event() == "ParkedCall" && m.ActionID() == "" {
			parked = times[i].UnixMilli()
		}
		if m.Event() == "ParkedCallsComplete" {
			break
		}
	}
	pc := e.Publish().Parkings["701"].ParkedCaller
	if parked == 0 || pc == nil || pc.ParkedAt != parked {
		t.Errorf("after the list: parked caller %+v, want parkedAt %d (the live ParkedCall's time)", pc, parked)
	}
}
