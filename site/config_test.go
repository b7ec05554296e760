package site

import (
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// TestQualifyCDRs: a named PBX's CDRs reach the recorder with their ids
// and its extensions qualified, outside numbers as they are.
func TestQualifyCDRs(t *testing.T) {
	eng := calls.New(calls.Config{Names: map[string]string{"201": "Alice"}})
	eng.Publish()
	var got []ami.Message
	observe := QualifyCDRs("site2", eng, func(m ami.Message) { got = append(got, m) })
	observe(ami.NewMessage(ami.Header{Key: "Event", Value: "Cdr"}, ami.Header{Key: "Source", Value: "201"},
		ami.Header{Key: "Destination", Value: "0721405516"}, ami.Header{Key: "UniqueID", Value: "1796028439.12"},
		ami.Header{Key: "LinkedID", Value: "1796028439.11"}))
	observe(ami.NewMessage(ami.Header{Key: "Event", Value: "Newchannel"}, ami.Header{Key: "Uniqueid", Value: "1796028439.13"},
		ami.Header{Key: "Linkedid", Value: "1796028439.11"}, ami.Header{Key: "CallerIDNum", Value: "201"}))
	if len(got) != 2 {
		t.Fatalf("%d messages", len(got))
	}
	c, n := got[0], got[1]
	if c.Get("Source") != "site2:201" || c.Get("Destination") != "0721405516" || c.Get("UniqueID") != "site2:1796028439.12" || c.Get("LinkedID") != "site2:1796028439.11" {
		t.Errorf("Cdr: %s", c)
	}
	if n.Get("Uniqueid") != "site2:1796028439.13" || n.Get("Linkedid") != "site2:1796028439.11" || n.Get("CallerIDNum") != "201" {
		t.Errorf("Newchannel: %s", n)
	}
}
