//go:build !unix

package calls

import "time"

// cpuTime is zero where getrusage is missing: the benchmarks then report
// no per-CPU-second figures.
func cpuTime() time.Duration { return 0 }
