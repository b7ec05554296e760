package synthpbx_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// unrecorded are the event kinds synthpbx emits that no recording has
// as an event: Announce's EndpointDetail stands for a resync's
// PJSIPShowEndpoint answer (recorded only as a list item, ActionID and
// a hundred headers).
var unrecorded = []string{ami.EventEndpointDetail}

// TestEventsAsRecorded drives every kind of call (and Announce) and
// compares each event synthpbx emits with the recorded events of its
// kind (ami/testdata, calls/testdata: a real Asterisk 22): header list,
// the headers of fixed value, where each Newexten runs. A kind that no
// recording has fails unless listed in unrecorded.
func TestEventsAsRecorded(t *testing.T) {
	shapes := amitest.ReadShapes(t, "../../ami/testdata", "../../calls/testdata")
	var got []ami.Message
	now := time.Unix(1796028439, 0)
	p, err := synthpbx.New(20, 2, 4, func(m ami.Message) { got = append(got, m) }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	p.Announce()
	for _, c := range []*synthpbx.Call{p.Dial(8, 9), p.DialIn("0611111111", 10), p.DialOut(11, "0622222222"),
		p.DialForward("0655555555", 18, "3471234567")} {
		p.Answer(c)
		p.Hangup(c)
	}
	qc := p.QueueCall("0633333333", p.Queues()[0], []int{0, 1})
	now = now.Add(3 * time.Second)
	p.Answer(qc)
	now = now.Add(9 * time.Second)
	p.Hangup(qc)
	p.Hangup(p.QueueCall("0644444444", p.Queues()[1], []int{4}))
	bl := p.Dial(12, 13)
	p.Answer(bl)
	p.Redirect(bl, 14)
	p.Answer(bl)
	p.Hangup(bl)
	at := p.Dial(15, 16)
	p.Answer(at)
	p.Transfer(at, 17)
	p.Answer(at)
	p.Complete(at)
	p.Hangup(at)

	kinds := map[string]int{}
	for _, m := range got {
		ev := m.Event()
		kinds[ev]++
		if !shapes.Known(ev) {
			continue
		}
		for _, d := range shapes.Diff(m) {
			// One failure per difference and kind, not per event.
			if kinds[ev+"\x00"+d]++; kinds[ev+"\x00"+d] == 1 {
				t.Errorf("%s", d)
			}
		}
	}
	n := 0
	for ev := range kinds {
		if strings.Contains(ev, "\x00") {
			continue
		}
		n++
		if !shapes.Known(ev) && !slices.Contains(unrecorded, ev) {
			t.Errorf("%s: no recording has one to compare with", ev)
		}
	}
	if n < 30 {
		t.Errorf("%d event kinds emitted, want the 30 and more of every call kind", n)
	}
}
