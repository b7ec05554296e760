package pbxsim

import (
	"errors"
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"
)

// TestRecovered: a panic in sipgo's code (a nil response dereferenced,
// as its CANCEL path does) comes back as an error, not a crash of the
// simulated PBX; an error or none passes through.
func TestRecovered(t *testing.T) {
	err := recovered(func() error {
		var res *sip.Response
		_ = res.StatusCode
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("a nil dereference: %v, want an error saying so", err)
	}
	want := errors.New("busy")
	if err := recovered(func() error { return want }); err != want {
		t.Fatalf("an error: %v, want it unchanged", err)
	}
	if err := recovered(func() error { return nil }); err != nil {
		t.Fatalf("no error: %v", err)
	}
}
