package synthpbx_test

import (
	"bufio"
	"bytes"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// rig is a PBX whose events an engine applies as they are emitted, on a
// clock the test moves.
type rig struct {
	t   *testing.T
	e   *calls.Engine
	p   *synthpbx.PBX
	now time.Time
}

func newRig(t *testing.T, exts, queues, members int) *rig {
	t.Helper()
	r := &rig{t: t, now: time.Unix(1796028439, 0)}
	clock := func() time.Time { return r.now }
	r.e = calls.New(calls.Config{Now: clock})
	p, err := synthpbx.New(exts, queues, members, func(m ami.Message) {
		// Every event goes over the wire as Asterisk writes it.
		b, err := ami.AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("event does not encode: %v\n%s", err, m)
		}
		back, err := ami.NewReader(bufio.NewReader(bytes.NewReader(b)), ami.ReaderConfig{}).ReadMessage()
		if err != nil {
			t.Fatalf("event does not parse: %v\n%s", err, b)
		}
		r.e.Apply(back)
	}, clock)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	r.e.SetLink(calls.LinkLive)
	p.Announce()
	r.e.Publish()
	return r
}

func (r *rig) snap() *calls.Snapshot { return r.e.Publish() }

// ext is extension i's status and its conversations' counterparts,
// connected or not.
func (r *rig) ext(i int) calls.Extension {
	r.t.Helper()
	x, ok := r.snap().Extensions.Lookup(synthpbx.Exten(i))
	if !ok {
		r.t.Fatalf("extension %s unknown", synthpbx.Exten(i))
	}
	return x
}

func (r *rig) want(i int, status string, counterparts ...string) {
	r.t.Helper()
	x := r.ext(i)
	if x.Status != status {
		r.t.Errorf("%s: status %q, want %q", x.Exten, x.Status, status)
	}
	if len(x.Conversations) != len(counterparts) {
		r.t.Errorf("%s: %d conversations %+v, want %d", x.Exten, len(x.Conversations), x.Conversations, len(counterparts))
		return
	}
	for _, cv := range x.Conversations {
		found := false
		for _, n := range counterparts {
			found = found || cv.CounterpartNum == n
		}
		if !found {
			r.t.Errorf("%s: talks to %q, want one of %v", x.Exten, cv.CounterpartNum, counterparts)
		}
	}
}

func (r *rig) connected(i int, with string) calls.Conversation {
	r.t.Helper()
	for _, cv := range r.ext(i).Conversations {
		if cv.CounterpartNum == with {
			if !cv.Connected {
				r.t.Errorf("%s with %s: not connected", synthpbx.Exten(i), with)
			}
			return cv
		}
	}
	r.t.Errorf("%s: no conversation with %s", synthpbx.Exten(i), with)
	return calls.Conversation{}
}

// noCalls checks that nothing shows a call: every extension online with
// no conversation, no trunk conversation, no queue caller waiting.
func (r *rig) noCalls() {
	r.t.Helper()
	s := r.snap()
	for k, x := range s.Extensions.All() {
		if x.Status != "online" || len(x.Conversations) != 0 {
			r.t.Errorf("%s: %s with %d conversations after every call ended", k, x.Status, len(x.Conversations))
		}
	}
	for k, tr := range s.Trunks.All() {
		if tr.Conversations.Len() != 0 {
			r.t.Errorf("trunk %s: %d conversations after every call ended", k, tr.Conversations.Len())
		}
	}
	for k, q := range s.Queues.All() {
		if len(q.WaitingCallers) != 0 {
			r.t.Errorf("queue %s: %d callers waiting after every call ended", k, len(q.WaitingCallers))
		}
	}
	if st := r.e.Stats(); st.Unknown != 0 {
		r.t.Errorf("%d events about unknown channels", st.Unknown)
	}
}

// TestEachKindDrivesTheEngine places one call of each kind by hand and
// checks what the engine shows at each step against what is true.
func TestEachKindDrivesTheEngine(t *testing.T) {
	// Extensions 2000-2003 are q1's members, 2004-2007 q2's, 2008- others.
	r := newRig(t, 20, 2, 4)
	p := r.p

	// Internal: 2008 calls 2009.
	c := p.Dial(8, 9)
	r.want(9, "ringing", "2008")
	r.want(8, "busy", "2009")
	p.Answer(c)
	r.connected(8, "2009")
	r.connected(9, "2008")
	p.Hangup(c)
	r.noCalls()

	// Trunk in and out.
	in := p.DialIn("0611111111", 10)
	r.want(10, "ringing", "0611111111")
	p.Answer(in)
	if cv := r.connected(10, "0611111111"); !cv.ThroughTrunk || cv.Direction != "in" {
		t.Errorf("inbound trunk call: %+v, want through the trunk, in", cv)
	}
	out := p.DialOut(11, "0622222222")
	p.Answer(out)
	if cv := r.connected(11, "0622222222"); !cv.ThroughTrunk || cv.Direction != "out" {
		t.Errorf("outbound trunk call: %+v, want through the trunk, out", cv)
	}
	if n := r.snap().Trunks.Get("trunk").Conversations.Len(); n != 2 {
		t.Errorf("trunk: %d conversations, want 2", n)
	}
	p.Hangup(in)
	p.Hangup(out)
	r.noCalls()

	// A queue call: 2000 and 2001 ring, 2000 answers, 2001 is cancelled.
	q1 := p.Queues()[0]
	qc := p.QueueCall("0633333333", q1, []int{0, 1})
	r.want(0, "ringing", "0633333333")
	r.want(1, "ringing", "0633333333")
	if w := r.snap().Queues.Get("q1").WaitingCallers; len(w) != 1 {
		t.Errorf("q1: %d callers waiting, want 1", len(w))
	}
	r.now = r.now.Add(3 * time.Second)
	p.Answer(qc)
	if cv := r.connected(0, "0633333333"); !cv.ThroughQueue || cv.QueueID != "q1" {
		t.Errorf("queue call: %+v, want through queue q1", cv)
	}
	r.want(1, "online")
	q := r.snap().Queues.Get("q1")
	if len(q.WaitingCallers) != 0 || q.HoldTime != 3 {
		t.Errorf("q1 after the answer: %d waiting, hold time %d, want 0 and 3", len(q.WaitingCallers), q.HoldTime)
	}
	r.now = r.now.Add(9 * time.Second)
	p.Hangup(qc)
	r.noCalls()
	q = r.snap().Queues.Get("q1")
	if q.Completed != 1 || q.TalkTime != 9 || q.Members["2000"].CallsTaken != 1 || q.Members["2001"].CallsTaken != 0 {
		t.Errorf("q1 after the call: completed %d, talk time %d, 2000 took %d, 2001 took %d; want 1, 9, 1, 0",
			q.Completed, q.TalkTime, q.Members["2000"].CallsTaken, q.Members["2001"].CallsTaken)
	}

	// A queue caller who hangs up while the members ring abandons.
	ab := p.QueueCall("0644444444", p.Queues()[1], []int{4})
	p.Hangup(ab)
	r.noCalls()
	if q := r.snap().Queues.Get("q2"); q.Abandoned != 1 || q.Completed != 0 {
		t.Errorf("q2: abandoned %d, completed %d, want 1 and 0", q.Abandoned, q.Completed)
	}

	// Blind transfer: 2012 talks to 2013, is redirected to 2014.
	bl := p.Dial(12, 13)
	p.Answer(bl)
	p.Redirect(bl, 14)
	r.want(13, "online")
	r.want(14, "ringing", "2012")
	p.Answer(bl)
	r.connected(12, "2014")
	r.connected(14, "2012")
	p.Hangup(bl)
	r.noCalls()

	// Attended transfer: 2015 talks to 2016, consults 2017, hangs up.
	at := p.Dial(15, 16)
	p.Answer(at)
	p.Transfer(at, 17)
	r.want(17, "ringing", "2015")
	p.Answer(at)
	r.connected(17, "2015")
	if x := r.ext(15); len(x.Conversations) != 2 {
		t.Errorf("transferer 2015 consulting: %d conversations, want 2 (held and consult)", len(x.Conversations))
	}
	p.Complete(at)
	r.want(15, "online")
	r.connected(16, "2017")
	r.connected(17, "2016")
	p.Hangup(at)
	r.noCalls()
}

// A forwarded call: an outside caller dials 2010, whose calls are
// forwarded to a cellphone on the trunk. Both legs are the trunk's: it
// shows the call as one conversation (the engine's rule for a
// trunk-to-trunk call: either leg's view, caller -> cellphone),
// connected once the cellphone answers; 2010, never rung, shows no
// call and stays online; nothing is left after the hangup.
func TestForwardDrivesTheEngine(t *testing.T) {
	r := newRig(t, 20, 0, 0)
	const caller, cell = "0655555555", "0666666666"
	fw := r.p.DialForward(caller, 10, cell)
	check := func(connected bool) {
		t.Helper()
		r.want(10, "online")
		convs := r.snap().Trunks.Get("trunk").Conversations.Map()
		if len(convs) != 1 {
			t.Fatalf("trunk: conversations %+v, want one", convs)
		}
		for id, cv := range convs {
			if id != "PJSIP/trunk-00000001>PJSIP/trunk-00000002" || cv.LinkedID != "1796028439.1" || !cv.ThroughTrunk {
				t.Errorf("trunk: conversation %s %+v, want the call from the caller's leg to the cellphone's", id, cv)
			}
			// The caller's leg sees the cellphone come in; the
			// cellphone's leg sees the caller go out.
			if !(cv.CounterpartNum == cell && cv.Direction == "in" || cv.CounterpartNum == caller && cv.Direction == "out") {
				t.Errorf("trunk: talks to %s, direction %s; want %s in or %s out", cv.CounterpartNum, cv.Direction, cell, caller)
			}
			if cv.Connected != connected {
				t.Errorf("trunk: connected %v, want %v", cv.Connected, connected)
			}
		}
	}
	check(false)
	r.now = r.now.Add(2 * time.Second)
	r.p.Answer(fw)
	check(true)
	if h := fw.Held(); !fw.Answered() || len(h) != 1 || h[0] != 10 {
		t.Errorf("forward answered %v, holds %v; want true and [10] (its extension, for the owner to free)", fw.Answered(), h)
	}
	r.p.Hangup(fw)
	r.noCalls()
}

// TestMixEndsClean runs a minute of mixed traffic (virtual time) through
// the engine and hangs everything up: every extension idle, nothing
// waiting, and each queue's completed calls and its members' calls taken
// as many as the queue calls whose member answered and hung up.
func TestMixEndsClean(t *testing.T) {
	r := newRig(t, 80, 3, 5)
	g, err := synthpbx.NewGen(r.p, synthpbx.Mix{Queue: 0.3, Trunk: 0.2, Transfer: 0.3, Forward: 0.1, Hold: 4 * time.Second, Ring: 500 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]int{} // queue calls answered, by queue
	taken := map[string]int{}    // by member
	g.Ended = func(c *synthpbx.Call) {
		if c.Kind == synthpbx.QueueCall && c.Answered() {
			answered[c.Queue.Name]++
			taken[synthpbx.Exten(c.B)]++
		}
	}
	// A forwarded extension never rings: it shows no call while its
	// forward is up.
	forwards := map[*synthpbx.Call]bool{}
	g.Answered = func(c *synthpbx.Call) {
		if c.Kind == synthpbx.Forward {
			forwards[c] = true
		}
	}
	ended := g.Ended
	g.Ended = func(c *synthpbx.Call) { delete(forwards, c); ended(c) }
	start := r.now
	for i := range 600 { // 10 calls a second for 60 s
		r.now = start.Add(time.Duration(i) * 100 * time.Millisecond)
		g.Due(r.now)
		g.Start(r.now)
		if i%7 == 0 {
			for c := range forwards {
				r.want(c.Fwd, "online")
			}
		}
	}
	if g.Up() < 20 {
		t.Errorf("%d calls up at the end, want about 40", g.Up())
	}
	g.HangupAll()
	r.noCalls()
	for k := range g.Placed {
		if g.Placed[k] == 0 {
			t.Errorf("no %v call placed", synthpbx.Kind(k))
		}
	}
	s := r.snap()
	for name, q := range s.Queues.All() {
		if q.Completed != answered[name] {
			t.Errorf("queue %s: %d completed, want %d", name, q.Completed, answered[name])
		}
		for k, m := range q.Members {
			if m.CallsTaken != taken[k] {
				t.Errorf("queue %s member %s: took %d calls, want %d", name, k, m.CallsTaken, taken[k])
			}
		}
	}
	if s.Queues.Len() != 3 {
		t.Errorf("%d queues, want 3", s.Queues.Len())
	}
	t.Logf("placed %v, skipped %d, at most %d up, %d events", g.Placed, g.Skipped, g.MaxUp, r.p.Events())
}

// Trunk calls go in and out in turn, transfers are blind and attended in
// turn: twenty of each pair placed, ten of each kind (drawn at random, a
// short run could make them all one way: CI once had eight trunk calls
// and none inbound).
func TestMixPairsInTurn(t *testing.T) {
	for _, share := range []synthpbx.Mix{{Trunk: 1}, {Transfer: 1}} {
		r := newRig(t, 80, 0, 0)
		share.Hold, share.Ring = 4*time.Second, 500*time.Millisecond
		g, err := synthpbx.NewGen(r.p, share, 7)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if g.Start(r.now) == nil {
				t.Fatal("a call skipped with 80 extensions free")
			}
		}
		first := synthpbx.TrunkIn
		if share.Transfer > 0 {
			first = synthpbx.Blind
		}
		if g.Placed[first] != 10 || g.Placed[first+1] != 10 {
			t.Errorf("placed %v, want 10 %v and 10 %v", g.Placed, first, first+1)
		}
		g.HangupAll()
		r.noCalls()
	}
}
