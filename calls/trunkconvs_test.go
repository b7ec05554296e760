package calls

import (
	"testing"
	"time"
)

// A trunk's conversation that shows an extension's number without being
// linked with any of its channels (the outside caller was put through to
// 2001 and 2001's leg is gone: the connected line still says 2001) is
// re-derived when 2001 is renamed, though none of the trunk's channels
// was touched (markShowing drops the trunk's kept conversations).
func TestTrunkConversationFollowsRename(t *testing.T) {
	now := time.Unix(1796028439, 0)
	e := New(Config{Now: func() time.Time { return now }})
	e.Apply(ev("EndpointDetail", "ObjectType", "endpoint", "ObjectName", "2001", "Callerid", `"Ann" <2001>`))
	e.Apply(ev("Newchannel", "Channel", "PJSIP/trunk-00000001", "ChannelState", "6", "CallerIDNum", "0611111111",
		"CallerIDName", "<unknown>", "ConnectedLineNum", "2001", "ConnectedLineName", "<unknown>", "Context", "from-trunk",
		"Exten", "600", "Uniqueid", "1.1", "Linkedid", "1.1"))
	name := func() string {
		t.Helper()
		for _, cv := range e.Publish().Trunks["trunk"].Conversations {
			return cv.CounterpartName
		}
		t.Fatal("the trunk has no conversation")
		return ""
	}
	if n := name(); n != "Ann" {
		t.Fatalf("counterpart %q, want Ann", n)
	}
	e.Apply(ev("EndpointDetail", "ObjectType", "endpoint", "ObjectName", "2001", "Callerid", `"Bea" <2001>`))
	if n := name(); n != "Bea" {
		t.Errorf("after the rename, counterpart %q, want Bea", n)
	}
}
