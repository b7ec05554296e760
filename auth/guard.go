package auth

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// Refusal reasons of a RateLimitError (its By field).
const (
	// ByIP: too many attempts from the client address, whatever the names.
	ByIP = "ip"
	// ByUserAddress: too many attempts for this user name from this address.
	ByUserAddress = "user_address"
	// ByUser: the user name is under attack, so addresses not known for it
	// share one try per delay, a delay that grows with every failure.
	ByUser = "user"
	// ByUserBudget: the user name has spent its budget of failures; no
	// address not known for it may try until its failures decay.
	ByUserBudget = "user_budget"
)

// guard decides whether a login attempt may be tried now. It replaces a
// per-user-name lock, which let anyone keep anyone out with five wrong
// passwords, by limits no stranger can spend for the real user at her
// usual address:
//
//   - per client address (perIP): a host guessing many names;
//   - per (user name, address) (perPair): a host guessing one password;
//   - per user name, across addresses not known for it: once the name's
//     decaying failure score passes delayAfter, those addresses together
//     get one try per delay, a delay that doubles with every further
//     failure (up to delayMax); once the score reaches budget, none of
//     them may try until it decays below. Many addresses guessing one
//     password are thus as slow as one, and bounded in total.
//
// An address the user has logged in from within knownFor (her usual
// address) is exempt from the per-name limits, so a distributed attack
// slows the attackers, not her. A name whose score passes delayAfter is
// logged as under attack (once, at most one line a second for all names)
// and counted in UnderAttack.
//
// Safe for concurrent use.
type guard struct {
	// Immutable after newGuard.
	perIP, perPair *Limiter
	decay          time.Duration // one failure of the name's score is forgotten per decay
	delayAfter     float64
	budget         float64
	delayBase      time.Duration
	delayMax       time.Duration
	knownFor       time.Duration
	now            func() time.Time
	log            *slog.Logger

	mu      sync.Mutex            // guards names, known, logAt, quiet
	names   map[string]*nameState // user name (any, existing or not) → its failures
	known   map[string]time.Time  // pairKey → last successful login from there
	logAt   time.Time             // last "under attack" line
	quiet   int                   // lines suppressed since
	refused uint64                // tries refused by the per-name limits
}

// nameState is one user name's recent failures.
type nameState struct {
	score    float64   // failures, decaying one per guard.decay
	at       time.Time // when score was computed
	next     time.Time // while delaying: the next try allowed from an unknown address
	attacked bool      // the score passed delayAfter (logged once per attack)
}

func newGuard(cfg Config) *guard {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "auth")
	budget := float64(cfg.UserBudget)
	if budget <= 0 {
		budget = math.Inf(1) // NewService sets the default; a bare guard has none
	}
	return &guard{
		perIP:      NewLimiter(cfg.IPBurst, cfg.IPEvery, cfg.Now),
		perPair:    NewLimiter(cfg.UserBurst, cfg.UserEvery, cfg.Now),
		decay:      cfg.UserEvery,
		delayAfter: float64(cfg.DelayAfter),
		budget:     budget,
		delayBase:  cfg.DelayBase,
		delayMax:   cfg.DelayMax,
		knownFor:   cfg.KnownFor,
		now:        cfg.Now,
		log:        log,
		names:      map[string]*nameState{},
		known:      map[string]time.Time{},
	}
}

func pairKey(username, ip string) string { return username + "\x00" + ip }

// admit reports whether an attempt for username from address key ip may
// check a password now; if not, the error says why and for how long.
func (g *guard) admit(username, ip string) *RateLimitError {
	if ok, wait := g.perIP.Take(ip); !ok {
		return &RateLimitError{By: ByIP, RetryAfter: wait}
	}
	if ok, wait := g.perPair.Take(pairKey(username, ip)); !ok {
		return &RateLimitError{By: ByUserAddress, RetryAfter: wait}
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isKnownLocked(username, ip, now) {
		return nil
	}
	n, ok := g.names[username]
	if !ok {
		return nil // no failures: no delay
	}
	s := g.scoreLocked(n, now)
	if s >= g.budget {
		g.refused++
		// The score decays below the budget after (s - budget) decays.
		return &RateLimitError{By: ByUserBudget, RetryAfter: time.Duration((s-g.budget)*float64(g.decay)) + time.Millisecond}
	}
	d := g.delay(s)
	if d == 0 {
		return nil
	}
	if now.Before(n.next) {
		g.refused++
		return &RateLimitError{By: ByUser, RetryAfter: n.next.Sub(now)}
	}
	n.next = now.Add(d)
	return nil
}

// delay is the wait between two tries from unknown addresses for a name
// with failure score s: none up to delayAfter, then delayBase doubling
// per failure, at most delayMax.
func (g *guard) delay(s float64) time.Duration {
	over := math.Floor(s - g.delayAfter)
	if over < 0 {
		return 0
	}
	d := float64(g.delayBase) * math.Pow(2, math.Min(over, 40))
	return time.Duration(math.Min(d, float64(g.delayMax)))
}

func (g *guard) scoreLocked(n *nameState, now time.Time) float64 {
	s := n.score - float64(now.Sub(n.at))/float64(g.decay)
	n.score, n.at = max(s, 0), now
	if n.score < g.delayAfter {
		n.attacked = false
	}
	return n.score
}

func (g *guard) isKnownLocked(username, ip string, now time.Time) bool {
	at, ok := g.known[pairKey(username, ip)]
	return ok && now.Sub(at) < g.knownFor
}

// failed counts a wrong password (or unknown name) for username tried
// from address key ip (elsewhere: on another node, which limits the
// address itself).
func (g *guard) failed(username, ip string) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.names[username]
	if !ok {
		if len(g.names) >= maxBuckets {
			g.sweepLocked(now)
		}
		if len(g.names) >= maxBuckets {
			return // still full of live attacks: count no new name
		}
		n = &nameState{at: now}
		g.names[username] = n
	}
	g.scoreLocked(n, now)
	n.score++
	if n.score >= g.delayAfter && !n.attacked {
		n.attacked = true
		g.logAttackLocked(username, ip, n, now)
	}
}

// logAttackLocked says that username is under attack, at most one line a
// second for all names (the others counted in the next line).
func (g *guard) logAttackLocked(username, ip string, n *nameState, now time.Time) {
	if now.Sub(g.logAt) < time.Second {
		g.quiet++
		return
	}
	quiet := g.quiet
	g.logAt, g.quiet = now, 0
	if len(username) > 64 {
		username = username[:64] + "..."
	}
	g.log.Warn("password guessing in progress: unknown addresses delayed for this user name", "user", username,
		"failures", int(n.score), "last_address", ip, "budget", int(g.budget), "other_names_suppressed", quiet)
}

// untried gives back the (user name, address) attempt of a login whose
// password could not be checked (the directory unavailable): a user
// retrying through an outage is not kept out once it ends. The address's
// own attempt stays spent, so a flood still costs the directory nothing
// more than the address limit allows.
func (g *guard) untried(username, ip string) {
	g.perPair.Refund(pairKey(username, ip))
}

// succeeded records a login of username from ip: the address becomes
// known for the name and its own attempt budget is restored.
func (g *guard) succeeded(username, ip string) {
	now := g.now()
	g.perPair.Reset(pairKey(username, ip))
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.known) >= maxBuckets {
		g.sweepLocked(now)
		if len(g.known) >= maxBuckets {
			clear(g.known) // only successful logins fill it; forgetting costs delays, never access
		}
	}
	g.known[pairKey(username, ip)] = now
}

// remember marks ip as an address username logged in from at at (a session
// read back after a restart), unless a later login is already recorded.
func (g *guard) remember(username, ip string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := pairKey(username, ip)
	if prev, ok := g.known[k]; (!ok || prev.Before(at)) && len(g.known) < maxBuckets {
		g.known[k] = at
	}
}

// GuardStats is what the login limits see now (Service.GuardStats).
type GuardStats struct {
	// UnderAttack is how many user names failed more than DelayAfter
	// times recently (their unknown addresses are being delayed).
	UnderAttack int
	// OverBudget is how many of them spent their budget of failures.
	OverBudget int
	// Refused counts tries refused by the per-name limits since start.
	Refused uint64
}

func (g *guard) stats() GuardStats {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	st := GuardStats{Refused: g.refused}
	for _, n := range g.names {
		s := g.scoreLocked(n, now)
		if s >= g.delayAfter {
			st.UnderAttack++
		}
		if s >= g.budget {
			st.OverBudget++
		}
	}
	return st
}

// sweep forgets names whose failures have decayed, known addresses past
// knownFor, and full rate-limit buckets.
func (g *guard) sweep() {
	g.perIP.Sweep()
	g.perPair.Sweep()
	now := g.now()
	g.mu.Lock()
	g.sweepLocked(now)
	g.mu.Unlock()
}

func (g *guard) sweepLocked(now time.Time) {
	for name, n := range g.names {
		if g.scoreLocked(n, now) == 0 {
			delete(g.names, name)
		}
	}
	for k, at := range g.known {
		if now.Sub(at) >= g.knownFor {
			delete(g.known, k)
		}
	}
}
