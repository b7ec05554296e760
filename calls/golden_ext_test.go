package calls

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// The second set of recordings (endpoints, AstDB, voicemail, dynamic
// queue members) is replayed with the actions the recorder sent
// (testdata/<name>.sent): each response is handed to ApplyAnswer with
// its action, as the link does with follow-up answers, so a DBGet
// answered "not found" and a MailboxCount's headers count.
var extScenarios = []string{
	"endpoint_details",
	"call_forward_astdb",
	"mwi_voicemail",
	"queue_dynamic_members",
}

// loadSent reads testdata/<name>.sent: the actions by ActionID.
func loadSent(t testing.TB, name string) map[string]ami.Message {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".sent"))
	if err != nil {
		t.Fatal(err)
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	out := map[string]ami.Message{}
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s.sent: %v", name, err)
		}
		out[m.ActionID()] = m
	}
}

// answerOf turns a recorded response into what ami.Client.Do returns.
func answerOf(m ami.Message) (ami.Response, error) {
	if m.Response() == "Error" {
		return ami.Response{Message: m}, &ami.ActionError{Action: "", Message: m.Get("Message")}
	}
	return ami.Response{Message: m}, nil
}

func replayExtGolden(t *testing.T, name, clock string) *Engine {
	rec := loadRecording(t, name)
	sent := loadSent(t, name)
	g := loadGolden(t, name)
	var sc StreamClock
	var times []time.Time
	i := 0
	now := sc.Now
	if clock == "timing" {
		times = loadTiming(t, rec)
		now = func() time.Time { return times[i] }
	}
	e := New(testConfig(now))
	e.SetLink(LinkLive)
	next := 0
	for i = range rec.msgs {
		m := rec.msgs[i]
		sc.Observe(m)
		e.Apply(m)
		if a, ok := sent[m.ActionID()]; ok && m.Kind() == ami.KindResponse {
			resp, err := answerOf(m)
			e.ApplyAnswer(a, resp, err)
		}
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
	if st := e.Stats(); st.Unknown != 0 || st.BadValues != 0 {
		t.Errorf("Stats.Unknown = %d, BadValues = %d on a clean recording", st.Unknown, st.BadValues)
	}
	return e
}

func TestGoldenRecordingsExt(t *testing.T) {
	for _, name := range extScenarios {
		for _, clock := range []string{"stream", "timing"} {
			t.Run(name+"/"+clock, func(t *testing.T) {
				t.Parallel()
				replayExtGolden(t, name, clock)
			})
		}
	}
}
