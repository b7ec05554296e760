package calls

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// trunkCall is the event sequence of an inbound trunk call answered by
// extension exten, as inbound_trunk_did.ami has it (headers the engine
// does not read left out).
func trunkCall(i int, exten string) []ami.Message {
	tch := fmt.Sprintf("PJSIP/trunk-%08x", 2*i)
	xch := fmt.Sprintf("PJSIP/%s-%08x", exten, 2*i+1)
	tu := fmt.Sprintf("1796028681.%d", 2*i)
	xu := fmt.Sprintf("1796028681.%d", 2*i+1)
	num := fmt.Sprintf("06%08d", i)
	br := fmt.Sprintf("bridge-%d", i)
	tc := []string{"Channel", tch, "CallerIDNum", num, "CallerIDName", "Caller", "Exten", exten, "Uniqueid", tu, "Linkedid", tu}
	xc := []string{"Channel", xch, "CallerIDNum", exten, "CallerIDName", "Ext " + exten, "Exten", "s", "Uniqueid", xu, "Linkedid", tu}
	with := func(base []string, kv ...string) []string { return append(append([]string(nil), base...), kv...) }
	return []ami.Message{
		ev("Newchannel", with(tc, "ChannelState", "4")...),
		ev("Newchannel", with(xc, "ChannelState", "0")...),
		ev("DialBegin", with(tc, "ChannelState", "4", "DestChannel", xch, "DestUniqueid", xu, "DestCallerIDNum", exten, "DialString", exten)...),
		ev("Newstate", with(xc, "ChannelState", "5", "ConnectedLineNum", num)...),
		ev("Newstate", with(xc, "ChannelState", "6", "ConnectedLineNum", num)...),
		ev("DialEnd", with(tc, "ChannelState", "4", "DestChannel", xch, "DestUniqueid", xu, "DialStatus", "ANSWER")...),
		ev("Newstate", with(tc, "ChannelState", "6", "ConnectedLineNum", exten)...),
		ev("BridgeCreate", "BridgeUniqueid", br, "BridgeType", "basic", "BridgeNumChannels", "0"),
		ev("BridgeEnter", with(xc, "ChannelState", "6", "BridgeUniqueid", br, "BridgeNumChannels", "1")...),
		ev("BridgeEnter", with(tc, "ChannelState", "6", "BridgeUniqueid", br, "BridgeNumChannels", "2")...),
	}
}

// upCalls returns an engine with n answered trunk calls, on extensions
// 2000 to 2000+n-1, published at *now.
func upCalls(t testing.TB, n int, now *time.Time) *Engine {
	e := New(testConfig(func() time.Time { return *now }))
	for i := range n {
		for _, m := range trunkCall(i, fmt.Sprint(2000+i)) {
			e.Apply(m)
		}
	}
	e.Publish()
	return e
}

func TestRefreshDurations(t *testing.T) {
	now := time.Unix(1796028681, 0)
	e := upCalls(t, 3, &now)
	s0 := e.Snapshot()
	if !bytes.Contains(s0.ExtensionJSON("2001"), []byte(`"duration":0,`)) {
		t.Fatalf("answered call at publish: %s", s0.ExtensionJSON("2001"))
	}
	seq := e.Feed().LastSeq()

	now = now.Add(5*time.Second + 300*time.Millisecond)
	s1 := e.RefreshDurations()
	if s1 == s0 || s1.Version != s0.Version+1 || s1.Seq != s0.Seq {
		t.Fatalf("refresh: version %d→%d seq %d→%d", s0.Version, s1.Version, s0.Seq, s1.Seq)
	}
	if e.Feed().LastSeq() != seq {
		t.Errorf("refresh appended to the feed: seq %d → %d", seq, e.Feed().LastSeq())
	}
	for _, x := range []string{"2000", "2001", "2002"} {
		if !bytes.Contains(s1.ExtensionJSON(x), []byte(`"duration":5,`)) {
			t.Errorf("%s after 5.3 s: %s", x, s1.ExtensionJSON(x))
		}
		if !bytes.Contains(s1.ExtensionsJSON(), []byte(`"duration":5,`)) {
			t.Errorf("collection after 5.3 s: %s", s1.ExtensionsJSON())
		}
	}
	if !bytes.Contains(s1.TrunkJSON("trunk"), []byte(`"duration":5,`)) || bytes.Contains(s1.TrunkJSON("trunk"), []byte(`"duration":0,`)) {
		t.Errorf("trunk after 5.3 s: %s", s1.TrunkJSON("trunk"))
	}
	// The previous snapshot is immutable.
	if !bytes.Contains(s0.ExtensionJSON("2001"), []byte(`"duration":0,`)) || bytes.Contains(s0.ExtensionsJSON(), []byte(`"duration":5,`)) {
		t.Errorf("the previous snapshot changed: %s", s0.ExtensionJSON("2001"))
	}

	now = now.Add(800 * time.Millisecond)
	if s := e.RefreshDurations(); s != s1 {
		t.Errorf("a refresh 0.8 s after the last one re-encoded")
	}
	now = now.Add(300 * time.Millisecond)
	if s := e.RefreshDurations(); s == s1 || !bytes.Contains(s.ExtensionJSON("2000"), []byte(`"duration":6,`)) {
		t.Errorf("refresh 1.1 s later: %s", s.ExtensionJSON("2000"))
	}
	// A Publish after a refresh keeps the refreshed bytes of entities it
	// does not touch.
	e.Apply(ev("DeviceStateChange", "Device", "PJSIP/2001", "State", "INUSE"))
	s := e.Publish()
	if !bytes.Contains(s.ExtensionJSON("2002"), []byte(`"duration":6,`)) {
		t.Errorf("publish after refresh: %s", s.ExtensionJSON("2002"))
	}
}

func TestRefreshDurationsIdle(t *testing.T) {
	now := time.Unix(1796028681, 0)
	e := New(testConfig(func() time.Time { return now }))
	e.Apply(ev("Newchannel", "Channel", "PJSIP/201-00000001", "ChannelState", "5", "CallerIDNum", "201", "Uniqueid", "1.1", "Linkedid", "1.1"))
	s0 := e.Publish()
	now = now.Add(3 * time.Second)
	if s := e.RefreshDurations(); s != s0 {
		t.Errorf("a refresh with no answered call stored a snapshot")
	}
}

// BenchmarkRefreshDurations is one refresh with 500 answered calls up
// (each an extension and a trunk conversation): the durations' refresh may
// take 2% of a core, so one op must stay under 20 ms. The tick-cost/s metric is
// the share of one core at one refresh a second.
func BenchmarkRefreshDurations(b *testing.B) {
	now := time.Unix(1796028681, 0)
	e := upCalls(b, 500, &now)
	if got := len(e.Snapshot().TrunkJSON("trunk")); got < 500*300 {
		b.Fatalf("trunk JSON %d bytes: calls not up", got)
	}
	for _, withColl := range []bool{false, true} {
		name := "encode"
		if withColl {
			// What the first reader of the new snapshot pays besides:
			// the extensions and trunks collection JSON.
			name = "encode+collections"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				now = now.Add(time.Second)
				s := e.RefreshDurations()
				if withColl {
					s.ExtensionsJSON()
					s.TrunksJSON()
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*100, "%core@1Hz")
		})
	}
}
