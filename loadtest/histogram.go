package loadtest

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the precision of a Histogram: each power of two is split
// into 2^(subBits-1) linear buckets, so a recorded value is off by at most
// 1/2^(subBits-1) of itself (under 1% with 8), as in HdrHistogram with two
// significant digits.
const (
	subBits  = 8
	subCount = 1 << subBits // values below this are exact
	subHalf  = subCount / 2
	// maxShift covers values up to 2^(subBits+maxShift): 2^47 ns is 39 hours.
	maxShift = 40
	nBuckets = subCount + maxShift*subHalf
)

// Histogram counts durations in log-linear buckets (HdrHistogram's
// layout): exact below 256 ns, then 128 buckets per power of two. It
// holds about 5,400 counters whatever the number of samples. The zero
// value is ready to use; it is not safe for concurrent use.
type Histogram struct {
	counts   [nBuckets]uint64
	total    uint64
	sum      float64 // of values in ns, for the mean
	sumSq    float64 // for the standard deviation
	min, max int64
}

// bucketOf maps a value in ns to its bucket.
func bucketOf(v int64) int {
	if v < subCount {
		return int(max(v, 0))
	}
	// shift so that the value has subBits significant bits left.
	shift := bits.Len64(uint64(v)) - subBits
	if shift > maxShift {
		return nBuckets - 1
	}
	// v>>shift is in [subHalf, subCount): the linear part of this power.
	return subCount + (shift-1)*subHalf + int(v>>shift) - subHalf
}

// bucketRange is the smallest and largest value (ns) of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	shift := (i-subCount)/subHalf + 1
	mant := int64((i-subCount)%subHalf + subHalf)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one duration (negative ones count as 0).
func (h *Histogram) Record(d time.Duration) { h.RecordN(d, 1) }

// RecordN adds n samples of duration d.
func (h *Histogram) RecordN(d time.Duration, n uint64) {
	if n == 0 {
		return
	}
	v := max(int64(d), 0)
	h.counts[bucketOf(v)] += n
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total += n
	f := float64(v)
	h.sum += f * float64(n)
	h.sumSq += f * f * float64(n)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
	h.sum += o.sum
	h.sumSq += o.sumSq
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.total }

// Max and Min are exact.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Mean is exact.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

// Stdev is the population standard deviation.
func (h *Histogram) Stdev() time.Duration {
	if h.total == 0 {
		return 0
	}
	m := h.sum / float64(h.total)
	return time.Duration(math.Sqrt(max(h.sumSq/float64(h.total)-m*m, 0)))
}

// Quantile is the value below or at which a fraction q (0..1) of the
// samples lie: the highest value of the bucket holding the sample of rank
// ceil(q*n), capped by the exact max (so Quantile(1) == Max).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var acc uint64
	for i, c := range h.counts {
		acc += c
		if acc >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(max(hi, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Bar is one non-empty bucket range of a histogram plot.
type Bar struct {
	Lo, Hi time.Duration
	Count  uint64
}

// Bars groups the samples into at most n bars of equal width on a log
// scale between Min and Max, for plots.
func (h *Histogram) Bars(n int) []Bar {
	if h.total == 0 || n <= 0 {
		return nil
	}
	lo, hi := math.Log(float64(max(h.min, 1))), math.Log(float64(max(h.max, 2)))
	if hi <= lo {
		hi = lo + 1
	}
	bars := make([]Bar, n)
	for i := range bars {
		bars[i].Lo = time.Duration(math.Exp(lo + (hi-lo)*float64(i)/float64(n)))
		bars[i].Hi = time.Duration(math.Exp(lo + (hi-lo)*float64(i+1)/float64(n)))
	}
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		blo, bhi := bucketRange(i)
		mid := float64(max((blo+bhi)/2, 1))
		j := int((math.Log(mid) - lo) / (hi - lo) * float64(n))
		bars[min(max(j, 0), n-1)].Count += c
	}
	return bars
}
