package bus

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestContenderStandByRetries: a candidate that cannot be made after a
// deposal (Open failing: NATS out of reach) is tried again until it
// is, rather than stopping the bridge; once ctx ends, standBy gives up.
func TestContenderStandByRetries(t *testing.T) {
	tries := 0
	c := &Contender{PBX: "pbx1", Log: slog.New(slog.DiscardHandler), New: func(ctx context.Context) (*Candidate, error) {
		if tries++; tries < 3 {
			return nil, errors.New("bus: connect: no servers available for connection")
		}
		return &Candidate{}, nil
	}}
	if cand := c.standBy(context.Background()); cand == nil || tries != 3 {
		t.Fatalf("standBy: %v after %d tries, want a candidate after 3", cand, tries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	tries = -100
	if cand := c.standBy(ctx); cand != nil {
		t.Fatalf("standBy with ctx ended: %v, want nil", cand)
	}
}
