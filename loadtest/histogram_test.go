package loadtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// within checks got against want with a relative tolerance.
func within(t *testing.T, name string, got, want time.Duration, tol float64) {
	t.Helper()
	if math.Abs(float64(got-want)) > tol*float64(want)+1 {
		t.Errorf("%s = %v, want %v ± %.1f%%", name, got, want, tol*100)
	}
}

func TestHistogramKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		draw func() time.Duration
	}{
		{"uniform 0-10ms", func() time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Millisecond))) }},
		{"exponential mean 2ms", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(2*time.Millisecond)) }},
		{"lognormal around 300us", func() time.Duration {
			return time.Duration(math.Exp(rng.NormFloat64()*0.8) * float64(300*time.Microsecond))
		}},
		{"bimodal 1ms/200ms", func() time.Duration {
			if rng.IntN(100) == 0 {
				return 200*time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
			}
			return time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Microsecond)))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h Histogram
			xs := make([]time.Duration, 200000)
			for i := range xs {
				xs[i] = c.draw()
				h.Record(xs[i])
			}
			slices.Sort(xs)
			exact := func(q float64) time.Duration { return xs[int(math.Ceil(q*float64(len(xs))))-1] }
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				within(t, "quantile", h.Quantile(q), exact(q), 0.01)
			}
			if h.Max() != xs[len(xs)-1] || h.Min() != xs[0] || h.Count() != uint64(len(xs)) {
				t.Errorf("max %v min %v count %d, want %v %v %d", h.Max(), h.Min(), h.Count(), xs[len(xs)-1], xs[0], len(xs))
			}
			var sum float64
			for _, x := range xs {
				sum += float64(x)
			}
			within(t, "mean", h.Mean(), time.Duration(sum/float64(len(xs))), 1e-6)
		})
	}
}

func TestHistogramBucketsAndMerge(t *testing.T) {
	// Every bucket's range maps back to it, and ranges tile the line.
	prev := int64(-1)
	for i := range nBuckets {
		lo, hi := bucketRange(i)
		if lo != prev+1 || bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d: [%d,%d] after %d; bucketOf(lo)=%d", i, lo, hi, prev, bucketOf(lo))
		}
		if i >= subCount && float64(hi-lo+1)/float64(lo) > 1.0/subHalf+1e-9 {
			t.Fatalf("bucket %d [%d,%d] is wider than 1/%d of its values", i, lo, hi, subHalf)
		}
		prev = hi
	}
	var a, b, all Histogram
	for i := range 1000 {
		d := time.Duration(i) * time.Microsecond
		all.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	if a.Count() != all.Count() || a.Quantile(0.9) != all.Quantile(0.9) || a.Max() != all.Max() || a.Min() != 0 {
		t.Errorf("merged %d/%v/%v, want %d/%v/%v", a.Count(), a.Quantile(0.9), a.Max(), all.Count(), all.Quantile(0.9), all.Max())
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 || empty.Bars(10) != nil {
		t.Error("an empty histogram should report zeros")
	}
	if n := len(all.Bars(20)); n != 20 {
		t.Errorf("Bars(20) gave %d bars", n)
	}
}

func TestSchedule(t *testing.T) {
	start := time.Unix(1000, 0)
	// 1000 requests/s over 4 connections: each sends every 4 ms, the
	// connections 1 ms apart, so together they send every millisecond.
	var all []time.Duration
	for i := range 4 {
		for k := range int64(250) {
			all = append(all, schedule(start, 1000, 4, i, k).Sub(start))
		}
	}
	slices.Sort(all)
	for j, d := range all {
		if want := time.Duration(j) * time.Millisecond; d != want {
			t.Fatalf("request %d due at %v, want %v", j, d, want)
		}
	}
	if got := schedule(start, 3, 1, 0, 3).Sub(start); got != time.Second {
		t.Errorf("4th request at 3/s due at %v, want 1s", got)
	}
}
