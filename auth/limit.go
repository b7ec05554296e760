package auth

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"
)

// RateLimitError is returned by Service.Login when an attempt is refused
// before its password is checked (see guard). Callers answer 429 with a
// Retry-After of RetryAfter (rounded up to whole seconds).
type RateLimitError struct {
	By         string // ByIP, ByUserAddress, ByUser or ByUserBudget
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	what := "from this address"
	switch e.By {
	case ByUserAddress:
		what = "for this user name from this address"
	case ByUser:
		what = "for this user name from several addresses"
	case ByUserBudget:
		return fmt.Sprintf("auth: too many failed logins for this user name; retry in %s", e.RetryAfter.Round(time.Second))
	}
	return fmt.Sprintf("auth: too many login attempts %s; retry in %s", what, e.RetryAfter.Round(time.Second))
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1.
func (e *RateLimitError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// maxBuckets bounds a Limiter's memory: past it, full buckets are dropped
// (they carry no information) before a new key is added.
const maxBuckets = 100_000

// Limiter is a set of token buckets by key: each key may spend burst
// attempts at once and regains one every `every`. Safe for concurrent use.
type Limiter struct {
	// Immutable after NewLimiter.
	burst float64
	every time.Duration
	now   func() time.Time

	mu sync.Mutex // guards m
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// NewLimiter returns a limiter of burst attempts regaining one per every.
func NewLimiter(burst int, every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{burst: float64(max(burst, 1)), every: max(every, time.Millisecond), now: now, m: map[string]*bucket{}}
}

// level refills b up to now.
func (l *Limiter) level(b *bucket, now time.Time) float64 {
	return math.Min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
}

// Take spends one attempt of key. When none is left it returns false and
// how long until one is.
func (l *Limiter) Take(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxBuckets {
			l.sweepLocked(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.m[key] = b
	}
	lv := l.level(b, now)
	if lv < 1 {
		return false, time.Duration((1 - lv) * float64(l.every))
	}
	b.tokens, b.at = lv-1, now
	return true, 0
}

// Refund gives key back one attempt (up to its burst): an attempt that
// was taken but could not be tried.
func (l *Limiter) Refund(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.m[key]; ok {
		b.tokens, b.at = math.Min(l.burst, l.level(b, now)+1), now
	}
}

// Reset forgets key, giving it a full burst again.
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	delete(l.m, key)
	l.mu.Unlock()
}

// Sweep drops buckets that have refilled completely.
func (l *Limiter) Sweep() {
	now := l.now()
	l.mu.Lock()
	l.sweepLocked(now)
	l.mu.Unlock()
}

func (l *Limiter) sweepLocked(now time.Time) {
	for k, b := range l.m {
		if l.level(b, now) >= l.burst {
			delete(l.m, k)
		}
	}
}

// Len is the number of buckets held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// ipKey is the rate-limit key of a client address: the address itself for
// IPv4, its /64 for IPv6 (one host usually owns a whole /64). Anything
// unparsable is used as it is.
func ipKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(addr); err2 == nil {
			a = ap.Addr()
		} else {
			return addr
		}
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
