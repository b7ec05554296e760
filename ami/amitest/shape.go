package amitest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// Shapes is what recordings of a real Asterisk say of each event kind it
// sent unasked (no ActionID): the header lists it was written with, the
// headers whose value never varied, and where in the dialplan each
// Newexten ran. A PBX that builds its own events (pbxsim,
// loadtest/synthpbx) compares each of them with Diff, so drift from
// Asterisk fails a test.
type Shapes struct {
	lists  map[string][]string            // event -> distinct header lists, keys comma-joined
	values map[string]map[string][]string // event -> header -> distinct values
	seen   map[string]int                 // event -> instances
	steps  map[string]bool                // Newexten "Context,Application,Priority"
}

// callData are the headers (matched as a suffix, so Dest..., LocalOne...
// too) whose value is the call's or the moment's, not the PBX's make:
// a recording that happens to show one value of them says nothing.
var callData = []string{
	"Channel", "ChannelState", "ChannelStateDesc", "CallerIDNum", "CallerIDName",
	"ConnectedLineNum", "ConnectedLineName", "Exten", "Priority", "Uniqueid", "UniqueId", "Linkedid",
	"BridgeUniqueid", "BridgeNumChannels", "Queue", "Position", "Count", "HoldTime", "TalkTime", "RingTime",
	"Status", "Cause", "TechCause", "Reason", "Id",
}

func isCallData(key string) bool {
	for _, d := range callData {
		if strings.HasSuffix(key, d) {
			return true
		}
	}
	return false
}

// NewShapes learns the shapes of the events in recordings.
func NewShapes(recordings ...[]ami.Message) *Shapes {
	s := &Shapes{lists: map[string][]string{}, values: map[string]map[string][]string{}, seen: map[string]int{}, steps: map[string]bool{}}
	for _, rec := range recordings {
		for _, m := range rec {
			if m.Kind() != ami.KindEvent || m.ActionID() != "" {
				continue
			}
			ev := m.Event()
			s.seen[ev]++
			if l := headerList(m); !slices.Contains(s.lists[ev], l) {
				s.lists[ev] = append(s.lists[ev], l)
			}
			if s.values[ev] == nil {
				s.values[ev] = map[string][]string{}
			}
			for _, h := range m.Headers() {
				if vs := s.values[ev][h.Key]; !slices.Contains(vs, h.Value) {
					s.values[ev][h.Key] = append(vs, h.Value)
				}
			}
			if ev == ami.EventNewexten {
				s.steps[step(m)] = true
			}
		}
	}
	return s
}

// ReadShapes learns the shapes of every .ami recording in dirs.
func ReadShapes(t testing.TB, dirs ...string) *Shapes {
	t.Helper()
	var recs [][]ami.Message
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.ami"))
		if err != nil || len(files) == 0 {
			t.Fatalf("amitest: no recordings in %s (%v)", d, err)
		}
		for _, f := range files {
			recs = append(recs, ReadRecording(t, f))
		}
	}
	return NewShapes(recs...)
}

func headerList(m ami.Message) string {
	keys := make([]string, 0, m.Len())
	for _, h := range m.Headers() {
		keys = append(keys, h.Key)
	}
	return strings.Join(keys, ",")
}

func step(m ami.Message) string {
	return m.Get("Context") + "," + m.Get("Application") + "," + m.Get("Priority")
}

// Known says whether the recordings have events of kind event.
func (s *Shapes) Known(event string) bool { return s.seen[event] > 0 }

// Diff is how m differs from the recorded events of its kind, one line
// a difference, none when it matches or its kind was never recorded
// (Known): its header list, in order, must be one recorded; a header
// that is not call data and had one value in two recorded events or
// more must have that value; a Newexten's Context, Application and
// Priority must have been recorded together.
func (s *Shapes) Diff(m ami.Message) []string {
	ev := m.Event()
	if !s.Known(ev) {
		return nil
	}
	var out []string
	if l := headerList(m); !slices.Contains(s.lists[ev], l) {
		out = append(out, fmt.Sprintf("%s headers %s\n\trecorded: %s", ev, l, strings.Join(s.lists[ev], "\n\tor:       ")))
	}
	if s.seen[ev] >= 2 {
		for _, h := range m.Headers() {
			if vs := s.values[ev][h.Key]; len(vs) == 1 && vs[0] != h.Value && !isCallData(h.Key) {
				out = append(out, fmt.Sprintf("%s %s: %q, recorded always %q", ev, h.Key, h.Value, vs[0]))
			}
		}
	}
	if ev == ami.EventNewexten && !s.steps[step(m)] {
		out = append(out, fmt.Sprintf("Newexten %s at %s priority %s: never recorded there", m.Get("Application"), m.Get("Context"), m.Get("Priority")))
	}
	return out
}
