package auth

import (
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
	// ByUser: the user name is under attack from several addresses, so each
	// address not yet known for it must wait a growing delay between tries.
	ByUser = "user"
)

// guard decides whether a login attempt may be tried now. It replaces a
// per-user-name lock, which let anyone keep anyone out with five wrong
// passwords, by three limits no stranger can spend for the real user:
//
//   - per client address (perIP): a host guessing many names;
//   - per (user name, address) (perPair): a host guessing one password;
//   - per user name, from addresses not known for it: once the name's
//     decaying failure score passes delayAfter, an address must wait a
//     delay that doubles with every further failure (up to delayMax)
//     between two tries. The first try from an address is never delayed,
//     and an address the user has logged in from within knownFor (her
//     usual address) is exempt, so a distributed attack slows the
//     attackers, not her.
//
// Safe for concurrent use.
type guard struct {
	// Immutable after newGuard.
	perIP, perPair *Limiter
	decay          time.Duration // one failure of the name's score is forgotten per decay
	delayAfter     float64
	delayBase      time.Duration
	delayMax       time.Duration
	knownFor       time.Duration
	now            func() time.Time

	mu    sync.Mutex            // guards names, known
	names map[string]*nameState // user name (any, existing or not) → its failures
	known map[string]time.Time  // pairKey → last successful login from there
}

// nameState is one user name's recent failures.
type nameState struct {
	score float64              // failures, decaying one per guard.decay
	at    time.Time            // when score was computed
	last  map[string]time.Time // address key → last checked attempt, while delaying
}

func newGuard(cfg Config) *guard {
	return &guard{
		perIP:      NewLimiter(cfg.IPBurst, cfg.IPEvery, cfg.Now),
		perPair:    NewLimiter(cfg.UserBurst, cfg.UserEvery, cfg.Now),
		decay:      cfg.UserEvery,
		delayAfter: float64(cfg.DelayAfter),
		delayBase:  cfg.DelayBase,
		delayMax:   cfg.DelayMax,
		knownFor:   cfg.KnownFor,
		now:        cfg.Now,
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
	d := g.delay(g.scoreLocked(n, now))
	if d == 0 {
		return nil
	}
	if last, ok := n.last[ip]; ok && now.Sub(last) < d {
		return &RateLimitError{By: ByUser, RetryAfter: d - now.Sub(last)}
	}
	if n.last == nil {
		n.last = map[string]time.Time{}
	}
	if len(n.last) >= maxBuckets {
		clear(n.last) // forgetting only shortens delays
	}
	n.last[ip] = now
	return nil
}

// delay is the wait between two tries from one address for a name with
// failure score s: none up to delayAfter, then delayBase doubling per
// failure, at most delayMax.
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
	return n.score
}

func (g *guard) isKnownLocked(username, ip string, now time.Time) bool {
	at, ok := g.known[pairKey(username, ip)]
	return ok && now.Sub(at) < g.knownFor
}

// failed counts a wrong password (or unknown name) for username.
func (g *guard) failed(username string) {
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
