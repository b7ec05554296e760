package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDistributedGuessingDoesNotLockOut: twenty addresses guessing alice's
// password as fast as they are let do not keep alice out of her usual
// address; the attackers share one growing delay, so 600 tries in five
// minutes check few passwords.
func TestDistributedGuessingDoesNotLockOut(t *testing.T) {
	clk := newClock()
	s := NewService(mustUsers(t), Config{Now: clk.Now})
	if _, err := s.Login("alice", "secret", "192.0.2.1"); err != nil { // her usual address
		t.Fatal(err)
	}
	refused := map[string]int{}
	var lastDelay time.Duration
	checked := 0
	for round := range 30 {
		for i := range 20 {
			_, err := s.Login("alice", fmt.Sprintf("guess%d", round), fmt.Sprintf("198.51.100.%d", i+1))
			var rl *RateLimitError
			switch {
			case errors.As(err, &rl):
				refused[rl.By]++
				if rl.By == ByUser {
					lastDelay = max(lastDelay, rl.RetryAfter)
				}
			case errors.Is(err, ErrBadCredentials):
				checked++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if _, err := s.Login("alice", "secret", "192.0.2.1"); err != nil {
			t.Fatalf("round %d: alice from her usual address: %v", round, err)
		}
		clk.Add(10 * time.Second)
	}
	if refused[ByUser] == 0 || lastDelay < 8*time.Second || checked > 20 {
		t.Errorf("attackers not slowed: %d passwords checked, refused %v, longest delay %v", checked, refused, lastDelay)
	}
	// A new address of hers, once the failures have decayed.
	clk.Add(time.Hour)
	if _, err := s.Login("alice", "secret", "203.0.113.9"); err != nil {
		t.Fatalf("alice from a new address after the attack: %v", err)
	}
	// Bob is unaffected.
	if _, err := s.Login("bob", "secret", "192.0.2.77"); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// TestGuessingFrom300Addresses: one guess of alice's password from each of
// 300 addresses, one a second, the right one at guess 250. The addresses
// together get no more password checks than the name's budget, the right
// guess is refused, alice logs in from her usual address throughout, and
// the attack is logged once and shows in GuardStats.
func TestGuessingFrom300Addresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{}},
		// A delay too short to matter: the budget alone stops them.
		{"budget alone", Config{DelayBase: time.Millisecond, DelayMax: time.Millisecond, UserBudget: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			var logs bytes.Buffer
			cfg := tc.cfg
			cfg.Now, cfg.Log = clk.Now, slog.New(slog.NewTextHandler(&logs, nil))
			s := NewService(mustUsers(t), cfg)
			if _, err := s.Login("alice", "secret", "192.0.2.1"); err != nil {
				t.Fatal(err)
			}
			budget := max(cfg.UserBudget, 30)
			checked, refused := 0, map[string]int{}
			for i := range 300 {
				pw := fmt.Sprintf("guess%d", i)
				if i == 249 {
					pw = "secret"
				}
				_, err := s.Login("alice", pw, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
				var rl *RateLimitError
				switch {
				case errors.Is(err, ErrBadCredentials):
					checked++
				case errors.As(err, &rl):
					refused[rl.By]++
				case i == 249 && err == nil:
					t.Fatal("the right password at guess 250 logged in")
				default:
					t.Fatalf("guess %d: %v", i+1, err)
				}
				if i%25 == 0 {
					if _, err := s.Login("alice", "secret", "192.0.2.1"); err != nil {
						t.Fatalf("guess %d: alice from her usual address: %v", i+1, err)
					}
				}
				clk.Add(time.Second)
			}
			t.Logf("%d passwords checked of 300 guesses, refused %v", checked, refused)
			// Five minutes of decay let a few more through.
			if checked > budget+5 || refused[ByUserBudget]+refused[ByUser] != 300-checked {
				t.Errorf("%d passwords checked (budget %d), refused %v", checked, budget, refused)
			}
			if tc.name == "budget alone" && refused[ByUserBudget] < 250 {
				t.Errorf("refused %v: want the budget to refuse", refused)
			}
			if st := s.GuardStats(); st.UnderAttack != 1 || st.Refused != uint64(300-checked) {
				t.Errorf("stats %+v", st)
			}
			if n := strings.Count(logs.String(), "password guessing in progress"); n != 1 || !strings.Contains(logs.String(), "user=alice") {
				t.Errorf("%d attack lines:\n%s", n, logs.String())
			}
		})
	}
}

func TestGuardDelayGrowsAndDecays(t *testing.T) {
	clk := newClock()
	g := newGuard(Config{IPBurst: 1000, IPEvery: time.Second, UserBurst: 1000, UserEvery: time.Minute,
		DelayAfter: 3, DelayBase: time.Second, DelayMax: 8 * time.Second, KnownFor: time.Hour, Now: clk.Now})
	for _, c := range []struct {
		score float64
		want  time.Duration
	}{{0, 0}, {2.9, 0}, {3, time.Second}, {4.5, 2 * time.Second}, {6, 8 * time.Second}, {1e9, 8 * time.Second}} {
		if got := g.delay(c.score); got != c.want {
			t.Errorf("delay(%v) = %v, want %v", c.score, got, c.want)
		}
	}
	for range 5 {
		g.failed("carol", "x")
	}
	if rl := g.admit("carol", "a"); rl != nil {
		t.Fatalf("first try from a: %v", rl)
	}
	if rl := g.admit("carol", "a"); rl == nil || rl.By != ByUser || rl.RetryAfter != 4*time.Second {
		t.Fatalf("second try from a: %v", rl)
	}
	if rl := g.admit("carol", "b"); rl == nil || rl.By != ByUser || rl.RetryAfter != 4*time.Second {
		t.Fatalf("first try from b: %v", rl) // the delay is the name's, not the address's
	}
	clk.Add(3 * time.Minute) // score 5 → 2: no more delay
	if rl := g.admit("carol", "a"); rl != nil {
		t.Fatalf("after decay: %v", rl)
	}
	clk.Add(time.Hour)
	g.sweep()
	if len(g.names) != 0 {
		t.Errorf("%d names left after sweep", len(g.names))
	}
}

func TestGuardKnownAddressExpires(t *testing.T) {
	clk := newClock()
	g := newGuard(Config{IPBurst: 1000, IPEvery: time.Second, UserBurst: 1000, UserEvery: time.Hour,
		DelayAfter: 1, DelayBase: time.Minute, DelayMax: time.Hour, KnownFor: 24 * time.Hour, Now: clk.Now})
	g.succeeded("dave", "home")
	for range 10 {
		g.failed("dave", "x")
	}
	for range 3 {
		if rl := g.admit("dave", "home"); rl != nil {
			t.Fatalf("known address delayed: %v", rl)
		}
	}
	clk.Add(25 * time.Hour)
	for range 10 {
		g.failed("dave", "x")
	}
	g.admit("dave", "home")
	if rl := g.admit("dave", "home"); rl == nil {
		t.Fatal("address still known after KnownFor")
	}
}

// TestKnownAddressSurvivesRestart: after a restart the address of a
// stored session is known again, so a guessing attack from elsewhere does
// not delay its user there.
func TestKnownAddressSurvivesRestart(t *testing.T) {
	store := NewFileSessions(t.TempDir() + "/s.json")
	clk := newClock()
	cfg := Config{Store: store, Now: clk.Now, DelayAfter: 1, DelayBase: time.Hour, DelayMax: time.Hour}
	s1 := NewService(mustUsers(t), cfg)
	if _, err := s1.Login("alice", "secret", "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	s2 := NewService(mustUsers(t), cfg)
	s2.LoadSessions(context.Background())
	for i := range 5 {
		s2.Login("alice", "guess", fmt.Sprintf("198.51.100.%d", i))
	}
	// A typo, then the right password: from an unknown address the second
	// try would wait an hour.
	if _, err := s2.Login("alice", "typo", "192.0.2.10"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("typo: %v", err)
	}
	if _, err := s2.Login("alice", "secret", "192.0.2.10"); err != nil {
		t.Fatalf("alice from her address after the restart: %v", err)
	}
	if _, err := s2.Login("olga", "typo", "203.0.113.1"); err != nil && !errors.Is(err, ErrBadCredentials) {
		t.Fatal(err)
	}
}

// flakyDirectory answers ErrDirectoryUnavailable while down is set, then
// checks the password.
type flakyDirectory struct{ down bool }

func (d *flakyDirectory) CheckPassword(username, password string) error {
	if d.down {
		return ErrDirectoryUnavailable
	}
	if password != "pw" {
		return ErrBadCredentials
	}
	return nil
}

// TestRetryThroughDirectoryOutage: a user who retries her login through
// a directory outage (more tries than her per-address burst) logs in as
// soon as the directory answers: tries that could not check a password
// are given back.
func TestRetryThroughDirectoryOutage(t *testing.T) {
	clk := newClock()
	dir := &flakyDirectory{down: true}
	users, err := NewUsers([]User{{Username: "dora", Role: RoleUser, Checker: dir}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(users, Config{Now: clk.Now})
	for i := range 12 {
		if _, err := s.Login("dora", "pw", "192.0.2.7"); !errors.Is(err, ErrDirectoryUnavailable) {
			t.Fatalf("try %d, directory down: %v", i, err)
		}
		clk.Add(4 * time.Second) // a person retrying, within the address's own limit
	}
	dir.down = false
	if _, err := s.Login("dora", "pw", "192.0.2.7"); err != nil {
		t.Fatalf("the directory back after 12 tries: %v", err)
	}
}
