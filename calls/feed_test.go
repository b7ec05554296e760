package calls

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestFeedSince(t *testing.T) {
	f := newFeed(4)
	if cs, ok := f.Since(0); !ok || len(cs) != 0 {
		t.Fatalf("empty feed: %v %v", cs, ok)
	}
	if _, ok := f.Since(1); ok {
		t.Fatal("Since ahead of the feed must fail")
	}
	for i := range 6 {
		f.append([]Change{{Type: ExtenUpdate, Key: string(rune('a' + i))}})
	}
	if f.LastSeq() != 6 {
		t.Fatalf("LastSeq %d", f.LastSeq())
	}
	// Buffer holds seq 3..6.
	for _, tc := range []struct {
		since uint64
		want  []uint64
		ok    bool
	}{
		{0, nil, false}, {1, nil, false}, {2, []uint64{3, 4, 5, 6}, true},
		{4, []uint64{5, 6}, true}, {6, nil, true}, {7, nil, false},
	} {
		cs, ok := f.Since(tc.since)
		var got []uint64
		for _, c := range cs {
			got = append(got, c.Seq)
		}
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("Since(%d) = %v %v, want %v %v", tc.since, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFeedWaitWakes(t *testing.T) {
	f := newFeed(8)
	w := f.Wait()
	select {
	case <-w:
		t.Fatal("woke before any append")
	default:
	}
	var wg sync.WaitGroup
	wg.Add(1)
	got := make(chan uint64, 1)
	go func() {
		defer wg.Done()
		<-w
		got <- f.LastSeq()
	}()
	f.append([]Change{{Type: PBXStatus}})
	wg.Wait()
	if s := <-got; s != 1 {
		t.Errorf("woken reader saw seq %d", s)
	}
	if w2 := f.Wait(); w2 == w {
		t.Error("Wait must return a fresh channel after an append")
	}
}

// TestFeedConcurrentReaders runs readers against the engine under -race.
func TestFeedConcurrentReaders(t *testing.T) {
	rec := loadRecording(t, "load_10_calls_5cps")
	var clk StreamClock
	e := New(Config{Now: clk.Now, Trunks: []string{"trunk"}, FeedSize: 64})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				w := e.Feed().Wait()
				cs, ok := e.Feed().Since(last)
				if !ok {
					s := e.Snapshot()
					_ = s.StateJSON()
					last = s.Seq
				}
				for _, c := range cs {
					if c.Seq != last+1 {
						t.Errorf("seq jumped %d -> %d", last, c.Seq)
					}
					last = c.Seq
				}
				select {
				case <-w:
				case <-done:
					return
				}
			}
		}()
	}
	for i, m := range rec.msgs {
		clk.Observe(m)
		e.Apply(m)
		if i%8 == 0 {
			e.Publish()
		}
	}
	e.Publish()
	close(done)
	wg.Wait()
}

func TestPublishCoalescesAndSeqGrows(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	clk := &fakeClock{t: time.Unix(1796028440, 0)}
	e := New(testConfig(clk.Now))
	s0 := e.Publish()
	// The call up to the answer in one batch: one change per entity (and
	// the ringing notice, the channel still being up at Publish).
	for _, m := range rec.msgs {
		e.Apply(m)
		if m.Event() == "BridgeEnter" {
			break
		}
	}
	s1 := e.Publish()
	cs, ok := e.Feed().Since(s0.Seq)
	if !ok {
		t.Fatal("Since failed")
	}
	seen := map[string]bool{}
	for _, c := range cs {
		k := c.Type.String() + "/" + c.Key
		if seen[k] && c.Type != ExtenRinging {
			t.Errorf("two %s changes in one Publish", k)
		}
		seen[k] = true
		if c.Type == ExtenUpdate && string(c.Data) != string(s1.ExtensionJSON(c.Key)) {
			t.Errorf("feed data of %s differs from the snapshot bytes", c.Key)
		}
	}
	if !seen["extenUpdate/201"] || !seen["extenUpdate/202"] || !seen["extenRinging/202"] {
		t.Errorf("changes: %v", seen)
	}
	if s1.Version <= s0.Version || s1.Seq <= s0.Seq {
		t.Errorf("version %d->%d seq %d->%d", s0.Version, s1.Version, s0.Seq, s1.Seq)
	}
	// Nothing changed: same snapshot, no new change, no re-encoding.
	e.Apply(rec.msgs[50]) // a VarSet
	if s2 := e.Publish(); s2 != s1 || e.Feed().LastSeq() != s1.Seq {
		t.Errorf("an idle Publish made version %d seq %d", s2.Version, e.Feed().LastSeq())
	}
}

func TestExtenRingingOnce(t *testing.T) {
	rec := loadRecording(t, "queue_answered")
	clk := &StreamClock{}
	cfg := testConfig(clk.Now)
	// 203's user has the caller among her own contacts; 204's does not.
	cfg.NameLookup = func(num string) string { return map[string]string{"0612345678": "Rossi Srl"}[num] }
	cfg.RingLookup = func(exten, num string) string {
		if exten == "203" && num == "0612345678" {
			return "Mario (203's own)"
		}
		return cfg.NameLookup(num)
	}
	e := New(cfg)
	var rings []map[string]string
	var last uint64
	for _, m := range rec.msgs {
		clk.Observe(m)
		e.Apply(m)
		s := e.Publish()
		cs, _ := e.Feed().Since(last)
		last = s.Seq
		for _, c := range cs {
			if c.Type == ExtenRinging {
				var v map[string]string
				if err := json.Unmarshal(c.Data, &v); err != nil {
					t.Fatal(err)
				}
				rings = append(rings, v)
			}
		}
	}
	sort.Slice(rings, func(i, j int) bool { return rings[i]["exten"] < rings[j]["exten"] })
	want := []map[string]string{
		{"exten": "203", "callerNum": "0612345678", "callerName": "Mario Rossi", "queue": "support", "convid": "PJSIP/trunk-0000000a>PJSIP/203-0000000b", "phonebookName": "Mario (203's own)"},
		{"exten": "204", "callerNum": "0612345678", "callerName": "Mario Rossi", "queue": "support", "convid": "PJSIP/trunk-0000000a>PJSIP/204-0000000c", "phonebookName": "Rossi Srl"},
	}
	if len(rings) != 2 {
		t.Fatalf("extenRinging: %v", rings)
	}
	for i := range want {
		for k, v := range want[i] {
			if rings[i][k] != v {
				t.Errorf("ring %d %s = %q, want %q", i, k, rings[i][k], v)
			}
		}
	}
}

func keysOf(t *testing.T, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sortedFields(s string) []string {
	f := strings.Fields(s)
	sort.Strings(f)
	return f
}

// TestJSONShapes: exactly docs/design.md's key names ("JSON shapes"),
// numbers as numbers.
func TestJSONShapes(t *testing.T) {
	cv := Conversation{ID: "a>b", AnsweredAt: 1000, StartTime: 500}
	x := Extension{Exten: "201", Conversations: map[string]Conversation{"a>b": cv}}
	b := appendExtension(nil, &x, 20_000, enc{})
	if got, want := keysOf(t, b), sortedFields("exten name status dnd cf cfb cfu ip port sipuseragent chanType context conversations"); !slices.Equal(got, want) {
		t.Errorf("extension keys %v, want %v", got, want)
	}
	cb := appendConversation(nil, &cv, 20_000, enc{})
	if got, want := keysOf(t, cb), sortedFields("id callId owner linkedId uniqueId connected direction counterpartNum counterpartName startTime answeredAt duration recording inConference throughQueue queueId throughTrunk"); !slices.Equal(got, want) {
		t.Errorf("conversation keys %v, want %v", got, want)
	}
	vm := cv
	vm.Voicemail = true
	if got, want := keysOf(t, appendConversation(nil, &vm, 20_000, enc{})), sortedFields("id callId owner linkedId uniqueId connected direction counterpartNum counterpartName startTime answeredAt duration recording inConference throughQueue queueId throughTrunk voicemail"); !slices.Equal(got, want) {
		t.Errorf("voicemail conversation keys %v, want %v", got, want)
	}
	var dec map[string]any
	_ = json.Unmarshal(cb, &dec)
	if dec["duration"] != 19.0 || dec["answeredAt"] != 1000.0 {
		t.Errorf("numbers: %s", cb)
	}
	q := Queue{Queue: "401", Members: map[string]*QueueMember{"201": {Member: "201"}}, WaitingCallers: map[string]*QueueCaller{"c": {Channel: "c"}}, Completed: 11}
	qb := appendQueue(nil, &q, 0, enc{})
	if got, want := keysOf(t, qb), sortedFields("queue name number members waitingCallers completed abandoned holdTime talkTime serviceLevel completedInServiceLevel abandonedInServiceLevel"); !slices.Equal(got, want) {
		t.Errorf("queue keys %v", got)
	}
	var qd struct {
		Members        map[string]json.RawMessage
		WaitingCallers map[string]json.RawMessage
		Completed      any
	}
	_ = json.Unmarshal(qb, &qd)
	if got, want := keysOf(t, qd.Members["201"]), sortedFields("member name type paused pausedReason loggedIn callsTaken lastCall lastPause loginTime"); !slices.Equal(got, want) {
		t.Errorf("member keys %v", got)
	}
	if got, want := keysOf(t, qd.WaitingCallers["c"]), sortedFields("channel num name position waitingSince"); !slices.Equal(got, want) {
		t.Errorf("waiting caller keys %v", got)
	}
	if qd.Completed != 11.0 {
		t.Errorf("completed %v", qd.Completed)
	}
	p := Parking{Parking: "701", ParkedCaller: &ParkedCaller{Channel: "c"}}
	pb := appendParking(nil, &p, 0, enc{})
	if got, want := keysOf(t, pb), sortedFields("parking name timeout parkedCaller"); !slices.Equal(got, want) {
		t.Errorf("parking keys %v", got)
	}
	var pd struct{ ParkedCaller json.RawMessage }
	_ = json.Unmarshal(pb, &pd)
	if got, want := keysOf(t, pd.ParkedCaller), sortedFields("channel num name parkedAt parkedBy"); !slices.Equal(got, want) {
		t.Errorf("parked caller keys %v", got)
	}
	if free := appendParking(nil, &Parking{Parking: "702"}, 0, enc{}); !strings.Contains(string(free), `"parkedCaller":null`) {
		t.Errorf("free space: %s", free)
	}
	tr := Trunk{Name: "provider1"}
	if got, want := keysOf(t, appendTrunk(nil, &tr, 0, enc{})), sortedFields("name status registration chanType conversations"); !slices.Equal(got, want) {
		t.Errorf("trunk keys %v", got)
	}
	if got, want := keysOf(t, appendStatus(nil, LinkLive, 3, 5)), sortedFields("pbx version since"); !slices.Equal(got, want) {
		t.Errorf("status keys %v", got)
	}
}

func TestJSONStringEscaping(t *testing.T) {
	for _, s := range []string{"plain", `q"b\s`, "ctl\x00\x1f\n\r\t", "bad\xffutf8", "sep\u2028\u2029", "Zoë 日本"} {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("%q -> %s: %v", s, b, err)
			continue
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if back != w {
			t.Errorf("%q round-trips to %q, want %q", s, back, w)
		}
	}
}

func TestStateJSONDeterministic(t *testing.T) {
	run := func() string {
		var clk StreamClock
		e := New(testConfig(clk.Now))
		for _, m := range loadRecording(t, "status_actions_during_call").msgs[:170] {
			clk.Observe(m)
			e.Apply(m)
			e.Publish()
		}
		return string(e.Snapshot().StateJSON())
	}
	a, b := run(), run()
	if a != b {
		t.Error("two replays printed different state")
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a), &v); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, []byte(a)); !slices.Equal(got, []string{"conferences", "extensions", "parkings", "pbx", "queues", "trunks"}) {
		t.Errorf("state keys %v", got)
	}
}

// TestChangeValues: an extenUpdate carries the extension its Data encodes
// and an extenRinging its Ringing, still after newer changes of the same
// extension (a reader following every state reads them late), so no
// reader parses the engine's JSON back.
func TestChangeValues(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	clk := &fakeClock{t: time.Unix(1796028440, 0)}
	e := New(testConfig(clk.Now))
	e.Publish()
	for _, m := range rec.msgs {
		e.Apply(m)
		e.Publish()
	}
	cs, ok := e.Feed().Since(0)
	if !ok {
		t.Fatal("Since failed")
	}
	exts, rings := 0, 0
	for _, c := range cs {
		switch c.Type {
		case ExtenUpdate:
			x, ok := c.Extension()
			if !ok {
				t.Fatalf("extenUpdate %d of %s without its extension", c.Seq, c.Key)
			}
			if b := appendExtension(nil, x, c.At, enc{}); string(b) != string(c.Data) {
				t.Errorf("extenUpdate %d: the value encodes\n%s\nData\n%s", c.Seq, b, c.Data)
			}
			exts++
		case ExtenRinging:
			r, ok := c.Ringing()
			if !ok || string(appendRinging(nil, r, "")) != string(c.Data) {
				t.Errorf("extenRinging %d: value %+v, Data %s", c.Seq, r, c.Data)
			}
			rings++
		}
		if _, ok := c.Extension(); ok != (c.Type == ExtenUpdate) {
			t.Errorf("a %s with an extension: %v", c.Type, ok)
		}
	}
	if exts < 4 || rings == 0 {
		t.Fatalf("%d extension changes, %d ringing", exts, rings)
	}
}

// TestChangeSize: a Change stays 80 bytes (the feed's ring of 10,000 and
// every Feed.Since copy): the values ride its ent.
func TestChangeSize(t *testing.T) {
	if n := unsafe.Sizeof(Change{}); n > 80 {
		t.Errorf("Change is %d bytes, want at most 80", n)
	}
}
