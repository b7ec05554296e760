package bus

import (
	"errors"
	"io"
	"log/slog"
	"testing"
)

// TestApplyRefusesGap: a follower applies a stream message only when it
// follows the last one applied, or when it is a genesis (what comes after
// a rollover's purge). An ops message after a hole is refused with ErrGap
// and leaves the served state as it was: a state missing ops is never
// served as if it were whole.
func TestApplyRefusesGap(t *testing.T) {
	_, log := recordLog(t, readRecording(t, "../ami/testdata/basic_call_caller_hangup.ami"))
	if len(log) < 3 {
		t.Fatalf("the recording gave %d messages, want >= 3", len(log))
	}
	n := &Node{cfg: Config{Served: NewReplica(engineConfig())}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	g := genesis{ID: "epoch", Created: 1796027700000, Gen: 1}
	if err := n.apply(stored{seq: 1, data: g.encode()}, false); err != nil {
		t.Fatalf("genesis: %v", err)
	}
	if err := n.apply(stored{seq: 2, data: log[0]}, false); err != nil {
		t.Fatalf("seq 2: %v", err)
	}
	if err := n.apply(stored{seq: 2, data: log[0]}, false); err != nil {
		t.Fatalf("seq 2 redelivered: %v", err)
	}
	before := state(n.cfg.Served.Engine())
	err := n.apply(stored{seq: 4, data: log[2]}, false)
	if !errors.Is(err, ErrGap) {
		t.Fatalf("seq 4 after 2: %v, want ErrGap", err)
	}
	if got := state(n.cfg.Served.Engine()); got != before || n.applied.Load() != 2 {
		t.Fatalf("the refused message changed the state (applied %d)", n.applied.Load())
	}
	// A rollover's purge leaves a hole before the next generation's
	// genesis: that one is applied, and what follows it.
	g2 := genesis{ID: "epoch", Created: 1796027800000, Gen: 2, Base: n.cfg.Served.Engine().Feed().LastSeq() + baseGap}
	if err := n.apply(stored{seq: 10, data: g2.encode()}, false); err != nil {
		t.Fatalf("genesis after a purge: %v", err)
	}
	if err := n.apply(stored{seq: 11, data: log[0]}, false); err != nil {
		t.Fatalf("seq 11 after the genesis: %v", err)
	}
	if n.applied.Load() != 11 {
		t.Fatalf("applied %d, want 11", n.applied.Load())
	}
}
