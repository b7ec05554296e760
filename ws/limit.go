package ws

import "time"

// bucket is a token bucket: tokens accrue at rate per second up to burst,
// and spending may leave it in debt, which later accruals pay back. The
// hub paces its fan-out with one (tokens are client wake-ups) and every
// connection bounds what its client sends with another (tokens are
// messages). Not safe for concurrent use: each bucket has one owner.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64 // most tokens held
	tokens float64
	last   int64 // hub clock (ns) of the last fill
}

func newBucket(rate, burst float64, now int64) bucket {
	return bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) fill(now int64) {
	if now > b.last {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.rate/1e9)
		b.last = now
	}
}

// spend takes n tokens and reports whether the bucket is still out of
// debt.
func (b *bucket) spend(now int64, n float64) bool {
	b.fill(now)
	b.tokens -= n
	return b.tokens >= 0
}

// wait is how long until the bucket holds a token again: 0 when it does.
func (b *bucket) wait(now int64) time.Duration {
	b.fill(now)
	if b.tokens > 0 {
		return 0
	}
	return time.Duration((-b.tokens)/b.rate*1e9) + time.Microsecond
}
