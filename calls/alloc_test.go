package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// TestNoiseDoesNotAllocate holds doc.go's promise: events that change
// nothing shown (VarSet, Newexten, RTCP, Cdr) are rejected without
// allocating. BenchmarkApplyNoise measures the same path; scripts/test.sh
// runs this check without -race too.
func TestNoiseDoesNotAllocate(t *testing.T) {
	var noise []ami.Message
	for _, name := range scenarios {
		for _, m := range loadRecording(t, name).msgs {
			switch m.Event() {
			case "VarSet", "Newexten", "RTCPSent", "RTCPReceived", "Cdr":
				noise = append(noise, m)
			}
		}
	}
	if len(noise) == 0 {
		t.Fatal("the recordings hold no noise events")
	}
	e := New(testConfig(time.Now))
	for _, m := range noise { // the first of each type adds a Stats.ByType key
		e.Apply(m)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		e.Apply(noise[i%len(noise)])
		i++
	}); n != 0 {
		t.Errorf("a noise event allocates %v times", n)
	}
}
