package calls

import (
	"fmt"
	"slices"
	"testing"
)

// hangupsOf replays a recording, publishing after every message (or
// once at the end when batch), and returns the Hangups the extenUpdate
// changes carried, as "exten uniqueid/cause".
func hangupsOf(t *testing.T, name string, batch bool) []string {
	t.Helper()
	rec := loadRecording(t, name)
	clk := &StreamClock{}
	e := New(testConfig(clk.Now))
	var out []string
	var last uint64
	for i, m := range rec.msgs {
		clk.Observe(m)
		e.Apply(m)
		if batch && i < len(rec.msgs)-1 {
			continue
		}
		s := e.Publish()
		cs, _ := e.Feed().Since(last)
		last = s.Seq
		for _, c := range cs {
			if c.Hangups() != nil && c.Type != ExtenUpdate {
				t.Errorf("%s %s carries Hangups", c.Type, c.Key)
			}
			for _, h := range c.Hangups() {
				out = append(out, fmt.Sprintf("%s %s/%d", c.Key, h.UniqueID, h.Cause))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestChangeHangups: the extenUpdate that drops a conversation whose
// channel hung up carries the Hangup event's cause (real Asterisk 20
// recordings: Bob's phone answers 486, both channels end with 17; a
// call hung up by the caller, both 16). A conversation never published
// (the whole call in one batch) is told of by no change.
func TestChangeHangups(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string
	}{
		{"busy_486", []string{"201 1796028451.2/17", "202 1796028451.3/17"}},
		{"basic_call_caller_hangup", []string{"201 1796028439.0/16", "202 1796028439.1/16"}},
	} {
		if got := hangupsOf(t, c.name, false); !slices.Equal(got, c.want) {
			t.Errorf("%s: hangups %q, want %q", c.name, got, c.want)
		}
		if got := hangupsOf(t, c.name, true); got != nil {
			t.Errorf("%s in one batch: hangups %q, want none", c.name, got)
		}
	}
}

// TestMultiHangups: the combined feed of several PBXs carries each
// engine's Hangups on its extensions' merged changes (site2's keys
// qualified).
func TestMultiHangups(t *testing.T) {
	clk := &StreamClock{}
	p := newTwoPBXs(clk.Now)
	var got []string
	var last uint64
	for _, m := range loadRecording(t, "busy_486").msgs {
		clk.Observe(m)
		for i, e := range []*Engine{p.a, p.b} {
			e.Apply(m)
			e.Publish()
			p.m.Sync(i)
		}
		cs, _ := p.m.Feed().Since(last)
		last = p.m.Feed().LastSeq()
		for _, c := range cs {
			for _, h := range c.Hangups() {
				got = append(got, fmt.Sprintf("%s %s/%d", c.Key, h.UniqueID, h.Cause))
			}
		}
	}
	slices.Sort(got)
	want := []string{"201 1796028451.2/17", "202 1796028451.3/17", "site2:201 1796028451.2/17", "site2:202 1796028451.3/17"}
	if !slices.Equal(got, want) {
		t.Errorf("hangups %q, want %q", got, want)
	}
}
