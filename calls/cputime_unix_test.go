//go:build unix

package calls

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process used (user and system, GC included):
// on a machine other work loads, events per CPU second is steadier than
// per wall second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
