//go:build !unix

package loadtest

import "time"

// cpuMeasured says whether cpuTime measures: not here (no getrusage), so
// a report's ClientCPU is 0 and bottleneckNotes says it is unknown.
const cpuMeasured = false

// cpuTime cannot sample this process's CPU here: always 0.
func cpuTime() time.Duration { return 0 }
