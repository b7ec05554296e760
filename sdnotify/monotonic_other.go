//go:build !linux

package sdnotify

// monotonicUsec: systemd runs on Linux only; elsewhere MONOTONIC_USEC is
// left out.
func monotonicUsec() (uint64, bool) { return 0, false }
