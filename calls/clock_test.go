package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

func msg(kv ...string) ami.Message {
	m := ami.NewMessage([]ami.Header{{Key: "Event", Value: "X"}}...)
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

func TestStreamClock(t *testing.T) {
	var c StreamClock
	if !c.Now().IsZero() {
		t.Fatal("zero before any message")
	}
	c.Observe(msg("EventTV", "2026-11-30T08:47:19.310+0000"))
	if want := time.Date(2026, 11, 30, 8, 47, 19, 310e6, time.UTC); !c.Now().Equal(want) {
		t.Errorf("EventTV: %v", c.Now())
	}
	c.Observe(msg("Uniqueid", "1796028439.0"))
	if c.Now().Unix() != 1796028439 {
		t.Errorf("Uniqueid: %v", c.Now())
	}
	c.Observe(msg("Uniqueid", "1796028400.5", "Timestamp", "1796028441.973612"))
	if want := time.Unix(1796028441, 973612000); !c.Now().Equal(want) {
		t.Errorf("Timestamp wins: %v, want %v", c.Now(), want)
	}
	c.Observe(msg("Uniqueid", "1796028400.99")) // an old channel's event
	if want := time.Unix(1796028441, 973612000); !c.Now().Equal(want) {
		t.Errorf("went backwards: %v", c.Now())
	}
	c.Observe(msg("Linkedid", "garbage", "Timestamp", "x"))
	c.Observe(msg())
	if want := time.Unix(1796028441, 973612000); !c.Now().Equal(want) {
		t.Errorf("garbage moved the clock: %v", c.Now())
	}
}
