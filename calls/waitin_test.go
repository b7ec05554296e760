package calls

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// checkWaitIn says where Engine.waitIn, which dropChannel trusts to skip
// the queues, differs from the queues' waiting callers it counts.
func checkWaitIn(t *testing.T, e *Engine, where string) {
	t.Helper()
	want := map[string]int{}
	for _, q := range e.queues {
		for name := range q.waiting.m {
			want[name]++
		}
	}
	for name, n := range want {
		if e.waitIn[name] != n {
			t.Fatalf("%s: %s waits in %d queues, waitIn says %d", where, name, n, e.waitIn[name])
		}
	}
	for name, n := range e.waitIn {
		if want[name] != n {
			t.Fatalf("%s: waitIn says %s waits in %d queues, it waits in %d", where, name, n, want[name])
		}
	}
}

// TestWaitInFollowsQueues runs the call centre's mix (callers join,
// leave, abandon and hang up waiting), with a resync that drops every
// channel now and then, and checks waitIn after every batch.
func TestWaitInFollowsQueues(t *testing.T) {
	e, m := mixEngine(t, 1200, 300)
	checkWaitIn(t, e, "after the fill")
	r := rand.New(rand.NewPCG(7, 11))
	waited := 0
	inBatches(e, m.stream(20000), r, func(i, n int) {
		m.now = m.now.Add(time.Duration(r.IntN(700)) * time.Millisecond)
		e.Publish()
		checkWaitIn(t, e, "event "+strconv.Itoa(i))
		waited = max(waited, len(e.waitIn))
		if i%7000 < n {
			e.BeginResync() // no lists: every channel a ghost, every waiting caller with it
			e.EndResync()
			checkWaitIn(t, e, "resync at event "+strconv.Itoa(i))
			if len(e.waitIn) != 0 || len(e.chans) != 0 {
				t.Fatalf("after an empty resync %d callers wait, %d channels", len(e.waitIn), len(e.chans))
			}
		}
	})
	if waited < 5 {
		t.Errorf("at most %d callers waited at once: the mix queues no calls", waited)
	}
}

// TestHangupLeavesEveryQueue: a caller whose QueueCallerLeave was lost
// waits in two queues; its Hangup takes it out of both.
func TestHangupLeavesEveryQueue(t *testing.T) {
	e := New(Config{Trunks: []string{"trunk"}})
	ch, uid := "PJSIP/trunk-00000001", "1700000000.1"
	e.Apply(scaleChanEv("Newchannel", ch, "0612345678", "<unknown>", "600", uid, uid, 4))
	for _, q := range []string{"sales", "support"} {
		e.Apply(scaleChanEv("QueueCallerJoin", ch, "0612345678", "<unknown>", "600", uid, uid, 6, "Queue", q, "Position", "1", "Count", "1"))
	}
	if e.waitIn[ch] != 2 || len(e.queues["sales"].waiting.m) != 1 || len(e.queues["support"].waiting.m) != 1 {
		t.Fatalf("waitIn %v; sales %v, support %v", e.waitIn, e.queues["sales"].waiting.m, e.queues["support"].waiting.m)
	}
	e.Apply(scaleChanEv("Hangup", ch, "0612345678", "<unknown>", "600", uid, uid, 6, "Cause", "16"))
	for _, q := range []string{"sales", "support"} {
		if w := e.queues[q].waiting.m; len(w) != 0 {
			t.Errorf("after the hangup %s holds %v", q, w)
		}
	}
	checkWaitIn(t, e, "after the hangup")
	if s := e.Publish(); len(s.Queues.Get("sales").WaitingCallers) != 0 || len(s.Queues.Get("support").WaitingCallers) != 0 {
		t.Errorf("published waiting callers %v, %v", s.Queues.Get("sales").WaitingCallers, s.Queues.Get("support").WaitingCallers)
	}
}

// TestHangupLeavesTheQueue: a caller hangs up while it waits (its leave
// comes after, or never).
func TestHangupLeavesTheQueue(t *testing.T) {
	e := New(Config{Trunks: []string{"trunk"}})
	ch, uid := "PJSIP/trunk-00000002", "1700000000.2"
	e.Apply(scaleChanEv("Newchannel", ch, "0612345678", "<unknown>", "600", uid, uid, 4))
	e.Apply(scaleChanEv("QueueCallerJoin", ch, "0612345678", "<unknown>", "600", uid, uid, 6, "Queue", "sales", "Position", "1", "Count", "1"))
	e.Apply(scaleChanEv("Hangup", ch, "0612345678", "<unknown>", "600", uid, uid, 6, "Cause", "16"))
	if w := e.queues["sales"].waiting.m; len(w) != 0 {
		t.Errorf("after the hangup sales holds %v", w)
	}
	checkWaitIn(t, e, "after the hangup")
}

// TestResyncDropsWaitingGhost: a QueueStatus entry of a channel no list
// shows waits until the resync ends, then waits nowhere.
func TestResyncDropsWaitingGhost(t *testing.T) {
	e := New(Config{Trunks: []string{"trunk"}})
	e.BeginResync()
	e.Apply(scaleEv("QueueParams", "Queue", "sales", "ActionID", "q1"))
	e.Apply(scaleEv("QueueEntry", "Queue", "sales", "Position", "1", "Channel", "PJSIP/trunk-00000003",
		"Uniqueid", "1700000000.3", "CallerIDNum", "0612345678", "Wait", "3", "ActionID", "q1"))
	if e.waitIn["PJSIP/trunk-00000003"] != 1 {
		t.Fatalf("the entry waits in %d queues", e.waitIn["PJSIP/trunk-00000003"])
	}
	e.EndResync()
	if w := e.queues["sales"].waiting.m; len(w) != 0 {
		t.Errorf("after the resync sales holds %v", w)
	}
	checkWaitIn(t, e, "after the resync")
}
