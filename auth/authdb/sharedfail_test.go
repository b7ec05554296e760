package authdb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/dbtest"
)

// TestSharedFailureBudget: a user name's budget of failed logins is one
// for the deployment. Guesses spread over two nodes from fresh addresses
// spend it together: once the failures on both reach the budget, a fresh
// address is refused on either node, while the real user, from the
// address she logged in from on the other node, still gets in.
func TestSharedFailureBudget(t *testing.T) {
	const budget = 6
	a, b, _ := sharedNodesWith(t, auth.Config{UserBudget: budget, DelayAfter: budget, IPBurst: 100, UserBurst: 100})
	if _, err := b.Login("alice", "secret", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	guess := func(s *auth.Service, i int) error {
		_, err := s.Login("alice", "wrong", fmt.Sprintf("198.51.100.%d", i))
		return err
	}
	// budget+1 failures, as a decaying score is a hair under the count:
	// 4 on A and 3 on B, each under the budget alone.
	for i := 1; i <= budget+1; i++ {
		node := a
		if i%2 == 0 {
			node = b
		}
		if err := guess(node, i); !errors.Is(err, auth.ErrBadCredentials) {
			t.Fatalf("guess %d: %v, want a wrong password (the budget is not spent yet)", i, err)
		}
	}
	dbtest.WaitFor(t, "each node to hear the other's failures", func() bool {
		return a.SharedStats().FailuresHeard >= budget/2 && b.SharedStats().FailuresHeard >= budget/2+1
	})
	for _, node := range []*auth.Service{a, b} {
		var rl *auth.RateLimitError
		if err := guess(node, 99); !errors.As(err, &rl) || rl.By != auth.ByUserBudget {
			t.Fatalf("a fresh address after %d failures over two nodes: %v, want refused by the name's budget", budget+1, err)
		}
	}
	dbtest.WaitFor(t, "alice's address on B known on A", func() bool {
		_, err := a.Login("alice", "secret", "192.0.2.1")
		return err == nil
	})
	st := a.SharedStats()
	t.Logf("A: %d failures told, %d heard, %d dropped", st.FailuresSent, st.FailuresHeard, st.FailuresDropped)
	if st.FailuresDropped != 0 {
		t.Errorf("%d failures dropped", st.FailuresDropped)
	}
}
