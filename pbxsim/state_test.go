package pbxsim

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/calls"
)

// view is the part of the calls state the proof compares: per extension,
// its status and its conversations as "direction:counterpart:connected".
type view map[string]extView

type extView struct {
	Status string
	Convs  []string
}

func (v view) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s%v ", k, v[k].Status, v[k].Convs)
	}
	return b.String()
}

// stateOf feeds msgs through a fresh calls.Engine and projects the state
// onto exts, and onto the queues withQueues. "offline" counts as "online": the recordings' phones had
// static contacts (no registration events), pbxsim's phones register.
func stateOf(t testing.TB, msgs []ami.Message, names map[string]string, exts []string, withQueues bool) view {
	t.Helper()
	eng := calls.New(calls.Config{Names: names})
	eng.SetLink(calls.LinkLive)
	for _, m := range msgs {
		eng.Apply(m)
	}
	snap := eng.Publish()
	var st struct {
		Extensions map[string]struct {
			Status        string `json:"status"`
			Conversations map[string]struct {
				Direction      string `json:"direction"`
				CounterpartNum string `json:"counterpartNum"`
				Connected      bool   `json:"connected"`
				ThroughQueue   bool   `json:"throughQueue"`
				QueueID        string `json:"queueId"`
			} `json:"conversations"`
		} `json:"extensions"`
		Queues map[string]struct {
			Members map[string]struct {
				CallsTaken int   `json:"callsTaken"`
				LastCall   int64 `json:"lastCall"`
				Paused     bool  `json:"paused"`
			} `json:"members"`
			WaitingCallers map[string]struct {
				Num      string `json:"num"`
				Name     string `json:"name"`
				Position int    `json:"position"`
			} `json:"waitingCallers"`
			Completed int `json:"completed"`
			Abandoned int `json:"abandoned"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(snap.StateJSON(), &st); err != nil {
		t.Fatalf("state JSON: %v\n%s", err, snap.StateJSON())
	}
	v := view{}
	for _, x := range exts {
		e := st.Extensions[x]
		ev := extView{Status: e.Status}
		if ev.Status == "offline" {
			ev.Status = "online"
		}
		for _, c := range e.Conversations {
			s := fmt.Sprintf("%s:%s:%v", c.Direction, c.CounterpartNum, c.Connected)
			if c.ThroughQueue || c.QueueID != "" {
				s += fmt.Sprintf(":queue=%v/%s", c.ThroughQueue, c.QueueID)
			}
			ev.Convs = append(ev.Convs, s)
		}
		slices.Sort(ev.Convs)
		v[x] = ev
	}
	if !withQueues {
		return v
	}
	// Queues as "queue:<name>": Status is "completed/abandoned", Convs the
	// members (member:callsTaken:called:paused) and the waiting callers
	// (wait:position:num:name).
	for name, q := range st.Queues {
		qv := extView{Status: fmt.Sprintf("completed=%d/abandoned=%d", q.Completed, q.Abandoned)}
		for k, m := range q.Members {
			qv.Convs = append(qv.Convs, fmt.Sprintf("member:%s:%d:%v:%v", k, m.CallsTaken, m.LastCall != 0, m.Paused))
		}
		for _, w := range q.WaitingCallers {
			qv.Convs = append(qv.Convs, fmt.Sprintf("wait:%d:%s:%s", w.Position, w.Num, w.Name))
		}
		slices.Sort(qv.Convs)
		v["queue:"+name] = qv
	}
	return v
}

// readRecording reads ../ami/testdata/<name>.ami.
func readRecording(t testing.TB, name string) []ami.Message {
	t.Helper()
	// The second set of recordings (features) is pbxsim's own testdata.
	if _, err := os.Stat("testdata/" + name + ".ami"); err == nil {
		return amitest.ReadRecording(t, "testdata/"+name+".ami")
	}
	return amitest.ReadRecording(t, "../ami/testdata/"+name+".ami")
}

// upTo returns msgs before the n-th (1-based) event named ev, or all of
// them when there are fewer.
func upTo(msgs []ami.Message, ev string, n int) []ami.Message {
	for i, m := range msgs {
		if m.Event() == ev {
			n--
			if n == 0 {
				return msgs[:i]
			}
		}
	}
	return msgs
}

// channelEvents lists, per channel in order of appearance, the sequence of
// channel event types, skipping the noise pbxsim does not emit and the
// items of list answers (they carry an ActionID). Cdr is
// left out too: cdr_manager posts it asynchronously, so Asterisk puts it
// before or after the caller's last events from one call to the next
// (queue_answered, queue_dynamic_members); cdrsOf compares Cdrs.
func channelEvents(msgs []ami.Message) [][]string {
	skip := map[string]bool{"VarSet": true, "Newexten": true, "RTCPSent": true, "RTCPReceived": true,
		"QueueMemberStatus": true, "Cdr": true}
	idx := map[string]int{}
	var out [][]string
	for _, m := range msgs {
		ch := m.Get("Channel")
		if ch == "" || m.Kind() != ami.KindEvent || skip[m.Event()] || m.ActionID() != "" {
			continue
		}
		i, ok := idx[ch]
		if !ok {
			i = len(out)
			idx[ch] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m.Event())
	}
	return out
}

// endpointEvents is channelEvents keyed by the channel's endpoint
// (PJSIP/201-0000000a: 201), for calls whose channels Asterisk creates in
// an order of its own (the members a queue rings).
func endpointEvents(msgs []ami.Message) map[string][]string {
	out := map[string][]string{}
	seqs := channelEvents(msgs)
	var order []string
	for _, m := range msgs {
		if ch := m.Get("Channel"); ch != "" && m.Kind() == ami.KindEvent && !slices.Contains(order, ch) {
			if len(channelEvents([]ami.Message{m})) > 0 {
				order = append(order, ch)
			}
		}
	}
	for i, ch := range order {
		ep, _, _ := strings.Cut(strings.TrimPrefix(ch, "PJSIP/"), "-")
		out[ep] = append(out[ep], seqs[i]...)
	}
	return out
}

// checkHeaders compares, for every event type both streams have, the
// header names (in order) of its first occurrence: pbxsim must write
// each event as Asterisk does. Events pbxsim leaves out are skipped.
func checkHeaders(t *testing.T, rec, got []ami.Message) {
	t.Helper()
	first := func(msgs []ami.Message) map[string]string {
		out := map[string]string{}
		for _, m := range msgs {
			if m.Kind() != ami.KindEvent || m.ActionID() != "" {
				continue
			}
			if _, ok := out[m.Event()]; ok {
				continue
			}
			var keys []string
			for _, h := range m.Headers() {
				keys = append(keys, h.Key)
			}
			out[m.Event()] = strings.Join(keys, ",")
		}
		return out
	}
	w, g := first(rec), first(got)
	for ev, keys := range g {
		if wk, ok := w[ev]; ok && wk != keys {
			t.Errorf("%s headers differ:\nrecording: %s\npbxsim:    %s", ev, wk, keys)
		}
	}
}

// checkShapes compares each event of got with the recorded events of its
// kind (amitest.Shapes: header list, fixed values, Newexten steps), one
// failure per difference.
func checkShapes(t *testing.T, got []ami.Message) {
	t.Helper()
	shapes := amitest.ReadShapes(t, "../ami/testdata", "../calls/testdata", "testdata")
	seen := map[string]bool{}
	for _, m := range got {
		for _, d := range shapes.Diff(m) {
			if !seen[d] {
				seen[d] = true
				t.Errorf("%s", d)
			}
		}
	}
}
