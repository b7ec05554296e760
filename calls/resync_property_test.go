package calls

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// stateOf is the part of a snapshot a resync must get right, as text:
// every conversation (times aside: a list knows a call's age only to the
// second), extension and trunk statuses, queue members and waiting
// callers, parked calls.
func stateOf(s *Snapshot) string {
	var lines []string
	conv := func(owner string, cs map[string]Conversation) {
		for id, c := range cs {
			lines = append(lines, fmt.Sprintf("conv %s %s connected=%v dir=%s with=%s/%s uid=%s linked=%s rec=%s conf=%v queue=%v/%s trunk=%v",
				owner, id, c.Connected, c.Direction, c.CounterpartNum, c.CounterpartName, c.UniqueID, c.LinkedID,
				c.Recording, c.InConference, c.ThroughQueue, c.QueueID, c.ThroughTrunk))
		}
	}
	for k, x := range s.Extensions.All() {
		// An extension the engine never heard of and an idle one are the
		// same to a user (the model lists only hints it saw change).
		if x.Status != "online" || len(x.Conversations) > 0 {
			lines = append(lines, fmt.Sprintf("ext %s %s", k, x.Status))
		}
		conv(k, x.Conversations)
	}
	for k, x := range s.Trunks.All() {
		conv(k, x.Conversations.Map())
	}
	for k, q := range s.Queues.All() {
		for ch := range q.WaitingCallers {
			lines = append(lines, fmt.Sprintf("waiting %s %s", k, ch))
		}
		for id, mb := range q.Members {
			lines = append(lines, fmt.Sprintf("member %s %s name=%s type=%s paused=%v/%s taken=%d", k, id, mb.Name, mb.Type, mb.Paused, mb.PausedReason, mb.CallsTaken))
		}
	}
	for k, p := range s.Parkings {
		if p.ParkedCaller != nil {
			lines = append(lines, fmt.Sprintf("parked %s %s", k, p.ParkedCaller.Channel))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// resyncCase is one way a resync can meet the live stream: the engine has
// applied msgs[:k] when the resync starts; the lists describe the PBX
// after msgs[:j] (j >= k: they are asked for after the resync starts);
// the live events msgs[j:] arrive with before of them ahead of the first
// list item, inside of them mixed among the items, the rest after
// EndResync.
//
// With gap > 0 the link was down before the resync: msgs[k-gap:k] were
// never seen (the reconnect case).
//
// With early > 0 the link applied the list items before the last early
// live events older than the lists: Run's select may take a finished
// resync before a batch the client had already read.
type resyncCase struct {
	k, j, before, inside int
	gap, early           int
	seed                 uint64
}

func (rc resyncCase) String() string {
	return fmt.Sprintf("k=%d j=%d before=%d inside=%d gap=%d early=%d seed=%d", rc.k, rc.j, rc.before, rc.inside, rc.gap, rc.early, rc.seed)
}

// run plays the case and returns the final state.
func (rc resyncCase) run(msgs []ami.Message, lists [][]ami.Message) string {
	e := New(testConfig((&fakeClock{t: time.Unix(1796028440, 0)}).Now))
	e.SetLink(LinkLive)
	for _, m := range msgs[:rc.k-rc.gap] {
		e.Apply(m)
	}
	e.Publish()
	if rc.gap > 0 {
		e.SetLink(LinkDown)
		e.Publish()
	}
	e.BeginResync()
	live := msgs[rc.k:]
	apply := func(ms []ami.Message) {
		for _, m := range ms {
			e.Apply(m)
		}
	}
	apply(live[:rc.j-rc.k-rc.early])
	live = live[rc.j-rc.k-rc.early:]
	apply(live[:rc.before])
	live = live[rc.before:]
	// The lists, in any order of lists, with live events mixed in.
	r := rand.New(rand.NewPCG(rc.seed, 11))
	var items []ami.Message
	for _, i := range r.Perm(len(lists)) {
		items = append(items, lists[i]...)
	}
	mixed := live[:rc.inside]
	live = live[rc.inside:]
	for len(items) > 0 || len(mixed) > 0 {
		if len(mixed) > 0 && (len(items) == 0 || r.IntN(2) == 0) {
			e.Apply(mixed[0])
			mixed = mixed[1:]
			continue
		}
		e.Apply(items[0])
		items = items[1:]
	}
	e.Publish()
	e.EndResync()
	e.Publish()
	apply(live)
	return stateOf(e.Publish())
}

// TestResyncInterleavingProperty: for every message boundary k of every
// recording, a resync started there, whose lists describe the PBX at some
// later point j and meet the live events that follow j before, among and
// after their items, ends in the same state as the events alone. -short
// samples the boundaries.
func TestResyncInterleavingProperty(t *testing.T) {
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msgs := loadRecording(t, name).msgs
			n := len(msgs)
			truth := New(testConfig((&fakeClock{t: time.Unix(1796028440, 0)}).Now))
			truth.SetLink(LinkLive)
			for _, m := range msgs {
				truth.Apply(m)
			}
			want := stateOf(truth.Publish())

			// The lists at every point j.
			model := amitest.NewModel()
			model.Configure(msgs)
			lists := make([][][]ami.Message, n+1)
			lists[0] = model.Lists()
			for j, m := range msgs {
				model.Apply(m)
				lists[j+1] = model.Lists()
			}

			step := 1
			if testing.Short() {
				step = max(1, n/40)
			}
			r := rand.New(rand.NewPCG(uint64(n), 3))
			failures := 0
			for k := 0; k <= n; k += step {
				cases := []resyncCase{{k: k, j: k}} // lists at once, live events after them
				for i := range 2 {
					j := k + r.IntN(min(n-k, 40)+1)
					rest := n - j
					before := r.IntN(min(rest, 20) + 1)
					inside := r.IntN(min(rest-before, 20) + 1)
					rc := resyncCase{k: k, j: j, before: before, inside: inside, seed: r.Uint64()}
					if i == 1 && j > k {
						rc.early, rc.before = 1+r.IntN(min(j-k, 10)), 0
					}
					cases = append(cases, rc)
				}
				if k > 0 { // a first connect: calls already up, lists at once
					before := r.IntN(min(n-k, 20) + 1)
					cases = append(cases, resyncCase{k: k, j: k, before: before, gap: k, seed: r.Uint64()})
				}
				if k > 0 { // a reconnect: the link was down for a while
					gap := 1 + r.IntN(min(k, 60))
					j := k + r.IntN(min(n-k, 40)+1)
					before := r.IntN(min(n-j, 20) + 1)
					cases = append(cases, resyncCase{k: k, j: j, before: before, inside: r.IntN(min(n-j-before, 20) + 1), gap: gap, seed: r.Uint64()})
				}
				for _, rc := range cases {
					if got := rc.run(msgs, lists[rc.j]); got != want {
						failures++
						if failures <= 3 {
							t.Errorf("%s: %s", rc, diffLines(want, got))
						}
					}
				}
			}
			if failures > 3 {
				t.Errorf("%d failing cases in all", failures)
			}
		})
	}
}

// diffLines lists the lines only in want (-) or only in got (+).
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return "\n" + strings.Join(out, "\n")
}

// TestResyncKeepsEventsOfUnlistedChannel: after a reconnect, a call set up
// while the link was down is bridged right after CoreShowChannels was
// taken; its BridgeEnter events are applied before the list items (the two
// paths lose their order). The call must still end up connected, not as
// two half conversations (the fault suite once found 2 of 60 calls so).
func TestResyncKeepsEventsOfUnlistedChannel(t *testing.T) {
	msgs := loadRecording(t, "basic_call_caller_hangup").msgs
	var enters []int
	for i, m := range msgs {
		if m.Event() == "BridgeEnter" {
			enters = append(enters, i)
		}
	}
	if len(enters) < 2 {
		t.Fatal("no bridged call in the recording")
	}
	msgs = msgs[:enters[1]+1]
	model := amitest.NewModel()
	for _, m := range msgs[:enters[0]] {
		model.Apply(m)
	}
	want := "conv 201 PJSIP/201-00000000>PJSIP/202-00000001 connected=true dir=out with=202/Bob"
	rc := resyncCase{k: enters[0], j: enters[0], before: len(msgs) - enters[0], gap: enters[0]}
	got := rc.run(msgs, model.Lists())
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant a line starting\n%s", got, want)
	}
}

// TestResyncKeepsQueueCallerJoinedMeanwhile: a caller joins a queue after
// QueueStatus was answered but before its items are applied: the list
// does not name her, and she must stay waiting. Then she leaves before a
// second resync's (older) list naming her is applied: she must not come
// back.
func TestResyncKeepsQueueCallerJoinedMeanwhile(t *testing.T) {
	msgs := loadRecording(t, "queue_answered").msgs
	join, leave := -1, -1
	for i, m := range msgs {
		switch m.Event() {
		case "QueueCallerJoin":
			join = i
		case "QueueCallerLeave":
			leave = i
		}
	}
	if join < 0 || leave < join {
		t.Fatal("no queue caller in the recording")
	}
	waiting := func(s string) bool { return strings.Contains(s, "waiting support PJSIP/trunk-") }
	model := amitest.NewModel()
	model.Configure(msgs)
	for _, m := range msgs[:join] {
		model.Apply(m)
	}
	// Lists taken just before the join; the join applied before them.
	rc := resyncCase{k: join, j: join, before: 1}
	if got := rc.run(msgs[:join+1], model.Lists()); !waiting(got) {
		t.Errorf("caller who joined during the resync dropped:\n%s", got)
	}
	for _, m := range msgs[join:leave] {
		model.Apply(m)
	}
	// Lists taken just before she leaves; the leave applied before them.
	rc = resyncCase{k: leave, j: leave, before: 1}
	if got := rc.run(msgs[:leave+1], model.Lists()); waiting(got) {
		t.Errorf("caller who left during the resync is back:\n%s", got)
	}
}

// TestResyncDoesNotReparkRetrievedCall: a parked call is retrieved after
// ParkedCalls was answered but before its items are applied: the list
// still names it, and it must not show as parked again.
func TestResyncDoesNotReparkRetrievedCall(t *testing.T) {
	msgs := loadRecording(t, "park_retrieve").msgs
	unpark := -1
	for i, m := range msgs {
		if m.Event() == "UnParkedCall" {
			unpark = i
		}
	}
	if unpark < 0 {
		t.Fatal("no retrieved call in the recording")
	}
	model := amitest.NewModel()
	model.Configure(msgs)
	for _, m := range msgs[:unpark] {
		model.Apply(m)
	}
	rc := resyncCase{k: unpark, j: unpark, before: 1}
	if got := rc.run(msgs[:unpark+1], model.Lists()); strings.Contains(got, "parked ") {
		t.Errorf("retrieved call parked again:\n%s", got)
	}
}
