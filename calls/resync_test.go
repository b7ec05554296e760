package calls

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// fakeClock is a settable clock for unit tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// listItems returns the messages of the status_actions recording that
// answer the resync actions (from CoreShowChannels to Parkinglots), in
// recorded order: list items and the live events interleaved with them.
func listItems(rec *recording) []ami.Message {
	var out []ami.Message
	in := false
	for _, m := range rec.msgs {
		if m.ActionID() == "coreshowchannels-2" {
			in = true
		}
		if in {
			out = append(out, m)
		}
		if m.Event() == "ParkinglotsComplete" {
			break
		}
	}
	return out
}

// ghostCall applies the basic call recording up to the bridge: a call
// 201<->202 that will never see its Hangup (the link went down).
func ghostCall(t *testing.T, e *Engine) {
	t.Helper()
	for _, m := range loadRecording(t, "basic_call_caller_hangup").msgs {
		e.Apply(m)
		if m.Event() == "BridgeEnter" && m.Get("Channel") == "PJSIP/201-00000000" {
			return
		}
	}
	t.Fatal("no bridge in basic call")
}

func convIDs(s *Snapshot, exten string) []string {
	var ids []string
	for id := range s.Extensions.Get(exten).Conversations {
		ids = append(ids, id)
	}
	return ids
}

func pbxStatus(t *testing.T, s *Snapshot) string {
	t.Helper()
	var st struct {
		PBX     string `json:"pbx"`
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(s.StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != s.Version {
		t.Errorf("status version %d, snapshot %d", st.Version, s.Version)
	}
	return st.PBX
}

func TestResyncDropsGhostKeepsRealCall(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1796028650, 0)}
	e := New(testConfig(clk.Now))
	e.SetLink(LinkLive)
	ghostCall(t, e)
	if s := e.Publish(); len(s.Extensions.Get("201").Conversations) != 1 || s.Stale || pbxStatus(t, s) != "live" {
		t.Fatalf("before: convs %v stale %v status %s", convIDs(s, "201"), s.Stale, s.StatusJSON())
	}

	e.SetLink(LinkDown)
	s := e.Publish()
	if !s.Stale || pbxStatus(t, s) != "down" {
		t.Fatalf("link down: stale %v status %s", s.Stale, s.StatusJSON())
	}
	if cs, _ := e.Feed().Since(s.Seq - 1); len(cs) != 1 || cs[0].Type != PBXStatus || string(cs[0].Data) != string(s.StatusJSON()) {
		t.Errorf("pbxStatus change: %+v", cs)
	}

	e.BeginResync()
	s = e.Publish()
	if !s.Stale || pbxStatus(t, s) != "resyncing" {
		t.Fatalf("resyncing: stale %v status %s", s.Stale, s.StatusJSON())
	}

	rec := loadRecording(t, "status_actions_during_call")
	items := listItems(rec)
	// Dave's leg hangs up while the lists are in flight, before its
	// CoreShowChannel item arrives: it must not come back.
	hangup := findMsg(t, rec, "Hangup", "PJSIP/204-00000039")
	e.Apply(hangup)
	for _, m := range items {
		e.Apply(m)
	}
	if s := e.Publish(); !s.Stale {
		t.Error("stale must hold until EndResync")
	}
	e.EndResync()
	s = e.Publish()
	if s.Stale || pbxStatus(t, s) != "live" {
		t.Fatalf("after resync: stale %v status %s", s.Stale, s.StatusJSON())
	}

	// The ghost 201-00000000 is gone, the real call 201-00000036 is rebuilt.
	want := "PJSIP/201-00000036>PJSIP/202-00000037"
	if ids := convIDs(s, "201"); len(ids) != 1 || ids[0] != want {
		t.Fatalf("201 conversations %v, want [%s]", ids, want)
	}
	cv := s.Extensions.Get("201").Conversations[want]
	if !cv.Connected || cv.Direction != "out" || cv.CounterpartNum != "202" || cv.CounterpartName != "Bob" {
		t.Errorf("rebuilt conversation %+v", cv)
	}
	// Duration 00:00:03 in the item: started 3 s before now.
	if cv.StartTime != clk.t.Add(-3*time.Second).UnixMilli() {
		t.Errorf("startTime %d, want %d", cv.StartTime, clk.t.Add(-3*time.Second).UnixMilli())
	}
	b := s.Extensions.Get("202").Conversations[want]
	if !b.Connected || b.Direction != "in" || b.CounterpartNum != "201" {
		t.Errorf("Bob's side %+v", b)
	}
	if n := len(s.Extensions.Get("204").Conversations); n != 0 {
		t.Errorf("hung-up 204 leg resurrected: %v", s.Extensions.Get("204").Conversations)
	}
	if n := len(s.Extensions.Get("203").Conversations); n != 1 {
		t.Errorf("203 ringing leg: %v", s.Extensions.Get("203").Conversations)
	}
	// What a resync finds is a load, not drift: the drift counter is for
	// events missed on a live link (the periodic check).
	if st := e.Stats(); st.ResyncLoads < 2 || st.DriftRepairs != 0 {
		t.Errorf("ResyncLoads = %d, want >= 2 (two ghost channels); DriftRepairs = %d, want 0", st.ResyncLoads, st.DriftRepairs)
	}
	q := s.Queues.Get("support")
	if len(q.WaitingCallers) != 1 || len(q.Members) != 2 {
		t.Errorf("queue after resync: %+v", q)
	}
}

func TestResyncFromEmpty(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1796028651, 0)}
	e := New(testConfig(clk.Now))
	e.BeginResync()
	rec := loadRecording(t, "status_actions_during_call")
	for _, m := range listItems(rec) {
		if m.ActionID() != "" { // list items only: no live events
			e.Apply(m)
		}
	}
	e.EndResync()
	s := e.Publish()
	cv, ok := s.Extensions.Get("202").Conversations["PJSIP/201-00000036>PJSIP/202-00000037"]
	if !ok || !cv.Connected || cv.Direction != "in" || cv.CounterpartNum != "201" || cv.AnsweredAt == 0 {
		t.Fatalf("202 from lists only: %v", s.Extensions.Get("202").Conversations)
	}
	if s.Extensions.Get("203").Status != "ringing" || s.Extensions.Get("201").Status != "busy" {
		t.Errorf("statuses: 201 %s 203 %s", s.Extensions.Get("201").Status, s.Extensions.Get("203").Status)
	}
	if _, ok := s.Extensions.Lookup("trunk"); ok {
		t.Error("the trunk endpoint became an extension")
	}
	if s.Trunks.Get("trunk").Status != "busy" {
		t.Errorf("trunk status %q", s.Trunks.Get("trunk").Status)
	}
}

// TestResyncDropsUnlistedQueueAndParking: a waiting caller and a parked
// call whose channels are not listed are removed at EndResync.
func TestResyncDropsUnlistedQueueAndParking(t *testing.T) {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028700, 0)}).Now))
	for _, m := range loadRecording(t, "park_retrieve").msgs {
		e.Apply(m)
		if m.Event() == "ParkedCall" {
			break
		}
	}
	for _, m := range loadRecording(t, "queue_answered").msgs {
		e.Apply(m)
		if m.Event() == "QueueCallerJoin" {
			break
		}
	}
	s := e.Publish()
	if s.Parkings["701"].ParkedCaller == nil || len(s.Queues.Get("support").WaitingCallers) != 1 {
		t.Fatalf("setup: %+v %+v", s.Parkings["701"], s.Queues.Get("support"))
	}
	e.BeginResync()
	e.EndResync() // every list came back empty
	s = e.Publish()
	if s.Parkings["701"].ParkedCaller != nil || len(s.Queues.Get("support").WaitingCallers) != 0 {
		t.Errorf("ghosts survived: %+v %+v", s.Parkings["701"], s.Queues.Get("support"))
	}
	if _, ok := s.Parkings["701"]; !ok {
		t.Error("a used space must stay listed, free")
	}
	for k, x := range s.Extensions.All() {
		if len(x.Conversations) != 0 {
			t.Errorf("%s: %v", k, x.Conversations)
		}
	}
}

func findMsg(t *testing.T, rec *recording, ev, channel string) ami.Message {
	t.Helper()
	for _, m := range rec.msgs {
		if m.Event() == ev && m.Get("Channel") == channel {
			return m
		}
	}
	t.Fatalf("%s %s not in %s", ev, channel, rec.name)
	return ami.Message{}
}

func TestReconcile(t *testing.T) {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028650, 0)}).Now))
	e.SetLink(LinkLive)
	ghostCall(t, e)
	rec := loadRecording(t, "status_actions_during_call")
	// Apply the live events up to the CoreShowChannels answer.
	for _, m := range rec.msgs {
		if m.ActionID() == "coreshowchannels-2" {
			break
		}
		e.Apply(m)
	}
	e.BeginReconcile()
	// A call that starts while the list is in flight is not in it, but
	// must survive the reconcile.
	late := ami.NewMessage([]ami.Header{
		{Key: "Event", Value: "Newchannel"}, {Key: "Channel", Value: "PJSIP/203-000000ff"},
		{Key: "ChannelState", Value: "4"}, {Key: "CallerIDNum", Value: "203"}, {Key: "CallerIDName", Value: "Carol"},
		{Key: "Exten", Value: "201"}, {Key: "Uniqueid", Value: "1796028660.99"}, {Key: "Linkedid", Value: "1796028660.99"},
	}...)
	e.Apply(late)
	var items []ami.Message
	for _, m := range listItems(rec) {
		if m.Event() == "CoreShowChannel" {
			items = append(items, m)
		}
	}
	n := e.Reconcile(items)
	if n != 2 {
		t.Errorf("Reconcile repaired %d, want 2 (the ghost's two channels)", n)
	}
	if st := e.Stats(); st.DriftRepairs != uint64(n) {
		t.Errorf("DriftRepairs %d, want %d", st.DriftRepairs, n)
	}
	s := e.Publish()
	if _, ok := s.Extensions.Get("201").Conversations["PJSIP/201-00000036>PJSIP/202-00000037"]; !ok || len(s.Extensions.Get("201").Conversations) != 1 {
		t.Errorf("201 after reconcile: %v", convIDs(s, "201"))
	}
	if len(s.Extensions.Get("203").Conversations) != 2 {
		t.Errorf("203 (queue leg + the late call): %v", convIDs(s, "203"))
	}
	// A second reconcile with the same list finds nothing to repair but
	// removes the unlisted late channel (no BeginReconcile this time).
	if n := e.Reconcile(items); n != 1 {
		t.Errorf("second Reconcile = %d, want 1", n)
	}
}

// TestSetLinkResyncingStartsResync: the link owner only calls
// SetLink(LinkResyncing) on connect, then applies the lists and EndResync.
func TestSetLinkResyncingStartsResync(t *testing.T) {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028650, 0)}).Now))
	e.SetLink(LinkLive)
	ghostCall(t, e)
	e.Publish()
	e.SetLink(LinkDown)
	e.SetLink(LinkResyncing)
	for _, m := range listItems(loadRecording(t, "status_actions_during_call")) {
		e.Apply(m)
	}
	e.EndResync()
	s := e.Publish()
	if ids := convIDs(s, "201"); len(ids) != 1 || ids[0] != "PJSIP/201-00000036>PJSIP/202-00000037" {
		t.Errorf("201 after SetLink resync: %v", ids)
	}
	if s.Stale || pbxStatus(t, s) != "live" {
		t.Errorf("status %s", s.StatusJSON())
	}
}

// TestReconcileWithoutMark: without BeginReconcile a channel is judged only
// once it has survived one Reconcile, so a call set up while the list was
// in flight is never dropped; the ghost goes at the next period.
func TestReconcileWithoutMark(t *testing.T) {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028650, 0)}).Now))
	ghostCall(t, e) // created before any Reconcile: maybe in flight
	if n := e.Reconcile(nil); n != 0 {
		t.Fatalf("first Reconcile without mark repaired %d", n)
	}
	if n := e.Reconcile(nil); n != 2 {
		t.Fatalf("second Reconcile repaired %d, want the ghost's 2 channels", n)
	}
	if s := e.Publish(); len(s.Extensions.Get("201").Conversations) != 0 {
		t.Errorf("ghost left: %v", convIDs(s, "201"))
	}
}
