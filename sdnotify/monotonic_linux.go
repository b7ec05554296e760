package sdnotify

import (
	"syscall"
	"unsafe"
)

// monotonicUsec is CLOCK_MONOTONIC in microseconds, the clock systemd
// compares MONOTONIC_USEC with. The runtime's monotonic clock is not
// exported, so ask the kernel; it is called once per reload.
func monotonicUsec() (uint64, bool) {
	var ts syscall.Timespec
	const clockMonotonic = 1 // CLOCK_MONOTONIC, linux/time.h
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3, true
}
