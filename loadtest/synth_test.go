package loadtest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Traffic a PBX cannot carry is refused with what is wrong, by
// CheckSynth (a caller's check before it starts a bridge) and by
// ServeSynth itself before it places a call: a share out of range,
// shares adding up to more than 1 (the forward share counted), calls
// not lasting longer than they ring, too few extensions.
func TestSynthTrafficChecked(t *testing.T) {
	size := SynthPBX{Extensions: 10}
	a, err := NewSynthAMI(t.Context(), "127.0.0.1:0", size, "u", "s", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, c := range []struct {
		tr   SynthTraffic
		want string
	}{
		{SynthTraffic{Calls: 2, QueueShare: 1.5}, "a share of 1.5, want 0 to 1"},
		{SynthTraffic{Calls: 2, TrunkShare: 0.5, ForwardShare: 0.6}, "add up to 1.1, more than 1"},
		{SynthTraffic{Calls: 2, Rate: 1, Ring: 3 * time.Second}, "calls lasting 2s, not longer than the ring time 3s"},
		{SynthTraffic{Calls: 10, Rate: 1, ForwardShare: 0.5}, "10 calls need 22 extensions that are no queue's members, have 10"},
	} {
		if err := CheckSynth(size, c.tr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckSynth(%+v): %v, want %q", c.tr, err, c.want)
		}
		// A check missed would serve until ctx ends, then say nothing.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := ServeSynth(ctx, SynthServeConfig{AMI: a, SynthTraffic: c.tr})
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ServeSynth(%+v): %v, want %q", c.tr, err, c.want)
		}
	}
	if n := a.Events(); n != 0 {
		t.Errorf("%d events sent: a call placed by traffic refused", n)
	}
	if err := CheckSynth(size, SynthTraffic{Calls: 4, Rate: 1, ForwardShare: 1}); err != nil {
		t.Errorf("4 forwards on 10 extensions: %v", err)
	}
}
