package calls

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// The golden files are written by hand from testdata/<scenario>.md (what
// happened in the call, as recorded from a real Asterisk), not from the
// engine's output. Each has checkpoints at moments of the recording and a
// final state; a checkpoint holds a subset of the state JSON to find there:
//   - an object matches when each of its keys matches in the actual object
//     (a null value: the key must be absent or null);
//   - an array matches a JSON object (conversations, members, waiting
//     callers) when the object has exactly that many values and each array
//     element matches a distinct value;
//   - conversations get a derived key "answered" (answeredAt > 0).

type golden struct {
	Scenario    string       `json:"scenario"`
	Story       string       `json:"story"`
	Checkpoints []checkpoint `json:"checkpoints"`
	Final       checkpoint   `json:"final"`
}

type checkpoint struct {
	After      string          `json:"after"`
	Note       string          `json:"note"`
	Extensions json.RawMessage `json:"extensions"`
	Queues     json.RawMessage `json:"queues"`
	Parkings   json.RawMessage `json:"parkings"`
	Trunks     json.RawMessage `json:"trunks"`
	Confs      json.RawMessage `json:"conferences"`
}

var scenarios = []string{
	"atxfer_complete",
	"attended_transfer_atxfer",
	"basic_call_caller_hangup",
	"blind_transfer_redirect",
	"busy_486",
	"confbridge_3_party",
	"confbridge_actions",
	"hold_unhold",
	"inbound_trunk_did",
	"load_10_calls_5cps",
	"no_answer_caller_cancel",
	"originate_click_to_call",
	"park_retrieve",
	"pickup_ringing",
	"queue_answered",
	"status_actions_during_call",
	// The third set: a FreePBX/NethVoice-style dialplan (Local channels,
	// several devices per user).
	"multi_device_user",
	"ringgroup_local",
	"queue_local_members",
	"park_by_transfer",
}

func loadGolden(t *testing.T, name string) *golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s.golden.json: %v", name, err)
	}
	return &g
}

// matches reports whether m is the message a checkpoint's "after" names:
// "Event Header=Value ...", the event name first.
func matches(m ami.Message, spec string) bool {
	f := strings.Fields(spec)
	if len(f) == 0 || (m.Event() != f[0] && m.Response() != f[0]) {
		return false
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if m.Get(k) != v {
			return false
		}
	}
	return true
}

func decodeState(t *testing.T, s *Snapshot) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(s.StateJSON(), &st); err != nil {
		t.Fatalf("state JSON: %v\n%s", err, s.StateJSON())
	}
	for _, coll := range []string{"extensions", "trunks"} {
		for _, x := range st[coll].(map[string]any) {
			for _, c := range x.(map[string]any)["conversations"].(map[string]any) {
				cm := c.(map[string]any)
				cm["answered"] = cm["answeredAt"].(float64) > 0
			}
		}
	}
	return st
}

// subset compares want (from a golden) with got (decoded state JSON); it
// returns a description of the first difference, or "".
func subset(path string, want, got any) string {
	switch w := want.(type) {
	case nil:
		if got != nil {
			return fmt.Sprintf("%s: want null/absent, got %s", path, show(got))
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want object, got %s", path, show(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if d := subset(path+"."+k, w[k], g[k]); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.(map[string]any)
		if !ok {
			if got == nil && len(w) == 0 {
				return ""
			}
			return fmt.Sprintf("%s: want %d values, got %s", path, len(w), show(got))
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: want %d values, got %d: %s", path, len(w), len(g), show(got))
		}
		keys := make([]string, 0, len(g))
		for k := range g {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		used := map[string]bool{}
		for i, wi := range w {
			found := false
			var firstDiff string
			for _, k := range keys {
				if used[k] {
					continue
				}
				if d := subset(path+"["+k+"]", wi, g[k]); d == "" {
					used[k], found = true, true
					break
				} else if firstDiff == "" {
					firstDiff = d
				}
			}
			if !found {
				return fmt.Sprintf("%s[%d]: no match (%s)", path, i, firstDiff)
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %s, got %s", path, show(want), show(got))
		}
	}
	return ""
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

func checkState(t *testing.T, label string, cp checkpoint, st map[string]any) {
	t.Helper()
	for _, part := range []struct {
		name string
		raw  json.RawMessage
	}{{"extensions", cp.Extensions}, {"queues", cp.Queues}, {"parkings", cp.Parkings}, {"trunks", cp.Trunks}, {"conferences", cp.Confs}} {
		if len(part.raw) == 0 {
			continue
		}
		var want any
		if err := json.Unmarshal(part.raw, &want); err != nil {
			t.Fatalf("%s: %s: %v", label, part.name, err)
		}
		if d := subset(part.name, want, st[part.name]); d != "" {
			t.Errorf("%s (%s): %s", label, cp.Note, d)
		}
	}
}

// replayGolden feeds a recording through Reader -> Engine, publishing after
// each message, and checks the golden's checkpoints.
func replayGolden(t *testing.T, name string, clock string) {
	rec := loadRecording(t, name)
	g := loadGolden(t, name)
	var now func() time.Time
	var sc StreamClock
	var times []time.Time
	i := 0
	if clock == "stream" {
		now = sc.Now
	} else {
		times = loadTiming(t, rec)
		now = func() time.Time { return times[i] }
	}
	e := New(recordingConfig(name, now))
	e.SetLink(LinkLive)
	next := 0
	for i = range rec.msgs {
		m := rec.msgs[i]
		sc.Observe(m)
		e.Apply(m)
		s := e.Publish()
		for next < len(g.Checkpoints) && matches(m, g.Checkpoints[next].After) {
			checkState(t, fmt.Sprintf("after #%d %q", i, g.Checkpoints[next].After), g.Checkpoints[next], decodeState(t, s))
			next++
		}
	}
	if next < len(g.Checkpoints) {
		t.Errorf("checkpoint %q never reached", g.Checkpoints[next].After)
	}
	checkState(t, "final", g.Final, decodeState(t, e.Snapshot()))
	if st := e.Stats(); st.Unknown != 0 {
		t.Errorf("Stats.Unknown = %d on a clean recording", st.Unknown)
	}
	if noMore != (chanMore{}) {
		t.Errorf("the shared empty chanMore was written: %+v", noMore)
	}
}

func TestGoldenRecordings(t *testing.T) {
	for _, name := range scenarios {
		for _, clock := range []string{"stream", "timing"} {
			t.Run(name+"/"+clock, func(t *testing.T) {
				t.Parallel()
				replayGolden(t, name, clock)
			})
		}
	}
}

var _ = strconv.Itoa

func TestSubsetCatchesMismatch(t *testing.T) {
	got := map[string]any{"c": map[string]any{"a": map[string]any{"x": 1.0}, "b": map[string]any{"x": 2.0}}, "n": nil}
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{`{"c":[{"x":1},{"x":2}]}`, true},
		{`{"c":[{"x":2},{"x":1}]}`, true},
		{`{"c":[{"x":1},{"x":1}]}`, false},
		{`{"c":[{"x":1}]}`, false},
		{`{"c":[]}`, false},
		{`{"n":null,"m":null}`, true},
		{`{"c":null}`, false},
		{`{"c":{"a":{"x":3}}}`, false},
	} {
		var w any
		if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
			t.Fatal(err)
		}
		if d := subset("$", w, any(got)); (d == "") != tc.ok {
			t.Errorf("%s: diff %q, want ok=%v", tc.want, d, tc.ok)
		}
	}
}

// TestQueueTalkTime: in queue_answered the PBX answers the caller (Answer()
// before Queue()) seconds before Carol does; the caller's and Carol's talk
// time starts when Carol is bridged with the caller, not at Answer().
func TestQueueTalkTime(t *testing.T) {
	rec := loadRecording(t, "queue_answered")
	times := loadTiming(t, rec)
	i := 0
	e := New(testConfig(func() time.Time { return times[i] }))
	var pbxAnswer, agentAnswer time.Time
	for i = range rec.msgs {
		m := rec.msgs[i]
		if m.Event() == "Newstate" && m.Get("Channel") == "PJSIP/trunk-0000000a" && m.Get("ChannelStateDesc") == "Up" {
			pbxAnswer = times[i]
		}
		if m.Event() == "BridgeEnter" && m.Get("Channel") == "PJSIP/trunk-0000000a" {
			agentAnswer = times[i]
		}
		e.Apply(m)
		s := e.Publish()
		if !agentAnswer.IsZero() {
			break
		}
		_ = s
	}
	if pbxAnswer.IsZero() || agentAnswer.Sub(pbxAnswer) < 2*time.Second {
		t.Fatalf("recording: PBX answer %v, agent answer %v: expected ~3 s apart", pbxAnswer, agentAnswer)
	}
	s := e.Snapshot()
	for _, cv := range s.Trunks.Get("trunk").Conversations.All() {
		if cv.AnsweredAt != agentAnswer.UnixMilli() {
			t.Errorf("caller answeredAt = %d, want the agent's answer %d (PBX Answer() was %d)", cv.AnsweredAt, agentAnswer.UnixMilli(), pbxAnswer.UnixMilli())
		}
	}
	for _, cv := range s.Extensions.Get("203").Conversations {
		if cv.AnsweredAt != agentAnswer.UnixMilli() {
			t.Errorf("Carol answeredAt = %d, want %d", cv.AnsweredAt, agentAnswer.UnixMilli())
		}
		// Duration at encode time: 0 s right at the answer, counted from it.
		if d := cv.Duration(agentAnswer.Add(5 * time.Second).UnixMilli()); d != 5 {
			t.Errorf("duration 5 s after answer = %d", d)
		}
	}
	if s.Trunks.Get("trunk").Conversations.Len() != 1 || len(s.Extensions.Get("203").Conversations) != 1 {
		t.Fatalf("conversations: trunk %v, 203 %v", s.Trunks.Get("trunk").Conversations, s.Extensions.Get("203").Conversations)
	}
}
