package webhook

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// rolloverCalls are the calls of TestRolloverWindowEvents, from
// recordings of real Asterisk: a queue call ringing 203 and 204 and 201
// talking to 202 (up across the rollover, listed by the new generation's
// resync: items), whose live events before the listing are before and
// after it rest; a call up before the rollover that ends inside its
// window (ended: its first part only, before its HangupRequest); and a
// call that begins and ends inside the window (inside).
type rolloverCalls struct {
	before, items, rest, ended, inside []ami.Message
	hangup                             []ami.Message // the rest of ended, for the run without a rollover
}

func loadRolloverCalls(t *testing.T) rolloverCalls {
	var c rolloverCalls
	msgs := loadAMI(t, "status_actions_during_call")
	i := slices.IndexFunc(msgs, func(m ami.Message) bool { return m.Get("ActionID") == "coreshowchannels-2" })
	if i < 0 {
		t.Fatal("no CoreShowChannels list in the recording")
	}
	c.before = msgs[:i]
	for _, m := range msgs[i:] {
		switch {
		case m.Get("ActionID") == "":
			c.rest = append(c.rest, m)
		case m.Kind() == ami.KindEvent:
			c.items = append(c.items, m)
		}
	}
	basic := loadAMIRound(t, "basic_call_caller_hangup", 3)
	up := slices.IndexFunc(basic, func(m ami.Message) bool { return m.Event() == "HangupRequest" })
	c.ended, c.hangup = basic[:up], basic[up:]
	c.inside = loadAMIRound(t, "basic_call_caller_hangup", 2)
	return c
}

// build makes shadow the new generation of p's PBX, as a bus rollover's
// shadow replica does: restarted past every seq p gave out, its resync's
// live events first (inside: the window's call, whole, or none), then
// the lists, which have the calls up but not the one that ended.
func (c *rolloverCalls) build(shadow, p *pbx, inside []ami.Message) {
	shadow.eng.Restart(p.eng.Feed().LastSeq() + 1<<20)
	shadow.sc = p.sc
	shadow.eng.SetLink(calls.LinkResyncing)
	shadow.eng.BeginResync()
	shadow.eng.Publish()
	shadow.play(inside)
	for _, m := range c.items {
		shadow.eng.Apply(m)
	}
	shadow.eng.EndResync()
	shadow.eng.Publish()
}

// caughtUp waits until reader r has read p's feed to its end.
func caughtUp(t *testing.T, r *reader, p *pbx) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.readSeq.Load() < p.eng.Feed().LastSeq() {
		if time.Now().After(deadline) {
			t.Fatalf("the reader is at seq %d, the feed at %d", r.readSeq.Load(), p.eng.Feed().LastSeq())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRolloverWindowEvents: the engine the webhooks follow adopts a new
// generation built aside (as a bus rollover does: calls.Engine.Restart
// on a shadow engine, its resync with live events, calls.Engine.Adopt)
// while a call began and ended inside that window, and another one ended
// in it. Every call's events reach the receiver exactly once, the same
// ids as without the rollover: the window's call rings, is answered and
// hangs up, in order; the one that ended hangs up; the ones up across
// the rollover raise nothing at it and hang up once after. Deterministic:
// the window's calls are only ever in the shadow's feed.
func TestRolloverWindowEvents(t *testing.T) {
	c := loadRolloverCalls(t)
	// Without a rollover, the same calls on one engine.
	plain := newReceiver(t)
	p := newPBX(t, nil)
	s, err := New(p.eng, []Config{hookConfig("crm", plain.URL())}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	p.play(c.before)
	p.play(c.ended)
	p.play(c.hangup)
	p.play(c.inside)
	p.play(c.items)
	p.play(c.rest)
	caughtUp(t, s.readers[0], p)
	want := plain.waitFor(t, 19, 10*time.Second) // 9 events of the queue call and 201-202's, 5 of each basic call
	time.Sleep(200 * time.Millisecond)
	want = plain.got()

	r := newReceiver(t)
	p = newPBX(t, nil)
	s, err = New(p.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	p.play(c.before)
	p.play(c.ended)
	caughtUp(t, s.readers[0], p)
	// The new generation, on a shadow engine.
	shadow := newPBX(t, nil)
	c.build(shadow, p, c.inside)
	if snap := shadow.eng.Snapshot(); snap.Link != calls.LinkLive {
		t.Fatalf("the shadow's link is %v after its resync", snap.Link)
	}
	p.eng.Adopt(shadow.eng)
	p.sc = shadow.sc
	p.play(c.rest)
	caughtUp(t, s.readers[0], p)
	recv := r.waitFor(t, len(want), 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	recv = r.got()

	key := func(g []got) []string {
		out := ids(g)
		slices.Sort(out)
		return out
	}
	if g, w := key(recv), key(want); !slices.Equal(g, w) {
		t.Fatalf("across the rollover the receiver got\n%s\nwant, as without it,\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	if n := s.generations.Load(); n != 1 {
		t.Errorf("%d generations replayed, want 1", n)
	}
	// The window's call in order, its hangup with its talk time.
	var inside []string
	for _, e := range recv {
		if strings.HasPrefix(e.Event.LinkedID, "1798") {
			inside = append(inside, e.Event.Extension+" "+e.Type)
			if e.Type == TypeHangup && e.Event.Extension == "202" && (e.Event.Answered == nil || !*e.Event.Answered) {
				b, _ := json.Marshal(e.Event)
				t.Errorf("the window's call's hangup: %s", b)
			}
		}
	}
	if w := []string{"202 ringing", "201 answered", "202 answered", "202 hangup", "201 hangup"}; !slices.Equal(inside, w) {
		t.Errorf("the window's call: %v, want %v", inside, w)
	}
}

// TestReplayHoldsGoneLegs: in a generation's replay a leg that goes and
// comes back (a new engine's state filled piecemeal) raises nothing; one
// that goes for good hangs up at the change where it went, in order with
// the other events; one of an extension no change names and the new
// state lacks hangs up at the end.
func TestReplayHoldsGoneLegs(t *testing.T) {
	tr := newTracker("", nil, func(string) bool { return true })
	up := map[string]conv{"a": {LinkedID: "L1", UniqueID: "U1", Connected: true, Direction: "out", AnsweredAt: 1000}}
	tr.apply("201", up, 1000, nil)
	tr.apply("203", map[string]conv{"c": {LinkedID: "L3", UniqueID: "U3", Connected: true, Direction: "in", AnsweredAt: 1000}}, 1000, nil)
	ext := func(seq uint64, key string, convs map[string]conv) calls.Change {
		return calls.ExtensionChange(seq, &calls.Extension{Exten: key, Conversations: convs}, int64(seq)*1000)
	}
	cs := []calls.Change{
		ext(11, "201", nil),
		ext(12, "202", map[string]conv{"b": {LinkedID: "L2", UniqueID: "U2", Direction: "in", CounterpartNum: "0612345678"}}),
		ext(13, "201", map[string]conv{"a": {LinkedID: "L1", UniqueID: "U1", Connected: true, Direction: "out", AnsweredAt: 1000}}),
		ext(14, "202", nil),
		ext(15, "204", map[string]conv{"d": {LinkedID: "L4", UniqueID: "U4", Direction: "in", CounterpartNum: "0698765432"}}),
	}
	var got []string
	snap := calls.New(calls.Config{}).Snapshot()
	tr.replay(cs, snap, func(e *Event) { got = append(got, e.Extension+" "+e.Type+" "+e.At[17:23]) },
		func(err error) { t.Fatal(err) })
	want := []string{"202 ringing 12.000", "202 hangup 14.000", "204 ringing 15.000", "203 hangup " + stamp(snap.At)[17:23]}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if len(tr.legs["201"]) != 1 || len(tr.legs["204"]) != 1 || tr.win != nil {
		t.Fatalf("after the replay: legs %v, window %v", tr.legs, tr.win)
	}
}

// TestRolloverOutgrewFeed: when the new generation's changes no longer
// fit the feed's buffer at the adoption, the reader falls back to the
// snapshot (counted as a resync, not a replay): a call up across the
// rollover still raises nothing more, and its hangup comes once.
func TestRolloverOutgrewFeed(t *testing.T) {
	c := loadRolloverCalls(t)
	r := newReceiver(t)
	small := func() *pbx {
		p := &pbx{}
		p.eng = calls.New(calls.Config{Now: p.sc.Now, Trunks: []string{"trunk"}, FeedSize: 8})
		p.eng.SetLink(calls.LinkLive)
		p.eng.Publish()
		return p
	}
	p := newPBX(t, nil) // its reader keeps up; the shadow's buffer, adopted, is small
	s, err := New(p.eng, []Config{hookConfig("crm", r.URL())}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	p.play(c.before)
	caughtUp(t, s.readers[0], p)
	shadow := small()
	c.build(shadow, p, c.inside) // more than 8 changes
	if _, _, ok := shadow.eng.Feed().Generation(); ok {
		t.Fatal("the shadow's generation fits its feed: the test needs it not to")
	}
	p.eng.Adopt(shadow.eng)
	p.sc = shadow.sc
	caughtUp(t, s.readers[0], p)
	p.play(c.rest)
	caughtUp(t, s.readers[0], p)
	g := r.waitFor(t, 9, 10*time.Second) // the queue call's 2 ringing and 2 hangups, 201-202's 5
	time.Sleep(200 * time.Millisecond)
	g = r.got()
	if len(g) != 9 || len(slices.Compact(slices.Sorted(slices.Values(ids(g))))) != 9 {
		t.Fatalf("%d events, want the 9 of the calls up across, once each: %v", len(g), ids(g))
	}
	if s.resyncs.Load() == 0 || s.generations.Load() != 0 {
		t.Errorf("resyncs %d, generations replayed %d: want a resync, no replay", s.resyncs.Load(), s.generations.Load())
	}
}

// TestRolloverUnreadTail: the reader is behind when the engine adopts
// the new generation (on the bus the served replica can apply a burst of
// stream messages, a short call's, the genesis and the resync's, before
// the reader runs): a call whose whole life is in the old generation's
// changes it had not read still rings, is answered and hangs up, before
// the replay's events; those of the calls up across the rollover are
// not raised again. Deterministic: the test pumps the feed itself.
func TestRolloverUnreadTail(t *testing.T) {
	c := loadRolloverCalls(t)
	p := newPBX(t, nil)
	s, err := New(p.eng, []Config{hookConfig("crm", "http://127.0.0.1:1/")}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r := s.readers[0]
	var got []string
	r.emit = func(e *Event) { got = append(got, e.LinkedID[:4]+" "+e.Extension+" "+e.Type) }
	feed := p.eng.Feed()
	snap := p.eng.Snapshot()
	r.tr.seed(snap)
	r.last = snap.Seq
	p.play(c.before)
	s.pump(r, feed)
	before := len(got)
	p.play(c.inside) // the short call, before the rollover, unread
	shadow := newPBX(t, nil)
	c.build(shadow, p, nil)
	p.eng.Adopt(shadow.eng)
	s.pump(r, feed)
	if r.last != feed.LastSeq() || s.generations.Load() != 1 {
		t.Fatalf("after the adoption the reader is at %d, the feed at %d; %d generations replayed", r.last, feed.LastSeq(), s.generations.Load())
	}
	want := []string{"1798 202 ringing", "1798 201 answered", "1798 202 answered", "1798 202 hangup", "1798 201 hangup"}
	if g := got[before:]; !slices.Equal(g, want) {
		t.Fatalf("events at the adoption %q, want the short call's %q", g, want)
	}
}
