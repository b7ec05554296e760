package main

import (
	"log/slog"
	"math"
	"runtime/debug"
)

// The Go collector's two knobs, set by serve. The bridge's live heap is
// small (about 30 MB at a call centre's 5,000 extensions and 2,000 calls)
// and its garbage is the encoding of every change, so at Go's default
// (GOGC 100) the collector and its write barriers took about a fifth of
// the engine's CPU (docs/loadtest.md, "The collector's share"). serve runs
// at gc-percent 400 under a soft memory limit: the heap may grow to five
// times what is live, and collections come sooner only as the limit nears.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 768 // MiB: 50,000 idle screens stay under 1 GiB whatever the target (docs/operations.md)
	maxMemoryLimit     = math.MaxInt64 >> 20
)

// gcSettings adds the collector's settings to s.
func gcSettings(s *settings, percent, limitMiB *int64) {
	s.integer(percent, "gc-percent", defaultGCPercent, "Go collector target: the heap may grow to 1+N/100 times what is live before a collection (Go's GOGC, which wins over this default; -1: off)")
	s.integer(limitMiB, "memory-limit", defaultMemoryLimit, "soft limit in MiB on the Go runtime's memory: collections come sooner as it nears (Go's GOMEMLIMIT, which wins over this default; 0: none)")
}

// gcTuning is what applyGC set.
type gcTuning struct {
	Percent  int   // the GC percent in force
	LimitMiB int64 // the soft limit, 0 for none
	FromEnv  bool  // GOGC or GOMEMLIMIT kept
	// restore gives back the settings in force before (serve's tests run
	// it in their own process).
	restore func()
}

// applyGC sets the collector from the settings (checkServe checked their
// ranges). A setting left at its default gives way to Go's own GOGC and
// GOMEMLIMIT when those are set: an operator's Go-standard tuning is kept.
func applyGC(st *settings, percent, limitMiB int64, getenv func(string) string) gcTuning {
	t := gcTuning{Percent: int(percent), LimitMiB: limitMiB}
	wasPercent, wasLimit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(wasPercent)
	t.restore = func() { debug.SetGCPercent(wasPercent); debug.SetMemoryLimit(wasLimit) }
	if st.source("gc-percent") == "" && getenv("GOGC") != "" {
		t.Percent, t.FromEnv = wasPercent, true
	} else {
		debug.SetGCPercent(t.Percent)
	}
	if st.source("memory-limit") == "" && getenv("GOMEMLIMIT") != "" {
		t.LimitMiB, t.FromEnv = wasLimit>>20, true
	} else if limitMiB == 0 {
		debug.SetMemoryLimit(math.MaxInt64)
	} else {
		debug.SetMemoryLimit(limitMiB << 20)
	}
	return t
}

// logGC says what the collector runs at.
func logGC(log *slog.Logger, t gcTuning) {
	log.Info("garbage collector", "gc_percent", t.Percent, "memory_limit_mib", t.LimitMiB, "from_go_env", t.FromEnv)
}
