package main

import (
	"io"
	"runtime/debug"
	"strings"
	"testing"
)

// TestApplyGC: serve runs the collector at its defaults, an explicit
// setting wins over Go's GOGC and GOMEMLIMIT, and those win over the
// defaults.
func TestApplyGC(t *testing.T) {
	was, wasLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(was); debug.SetMemoryLimit(wasLimit) })
	parse := func(env map[string]string, args ...string) (*settings, serveConfig) {
		t.Helper()
		var c serveConfig
		st := serveSettings(&c)
		if err := st.parse("serve", args, func(k string) string { return env[k] }, io.Discard); err != nil {
			t.Fatal(err)
		}
		return st, c
	}
	check := func(name string, got gcTuning, percent int, limit int64, fromEnv bool) {
		t.Helper()
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if got.Percent != percent || got.LimitMiB != limit || got.FromEnv != fromEnv || p != percent || debug.SetMemoryLimit(-1) != limit<<20 && limit != 0 {
			t.Errorf("%s: %+v, runtime at %d and %d bytes; want %d, %d MiB, from env %v", name, got, p, debug.SetMemoryLimit(-1), percent, limit, fromEnv)
		}
	}

	st, c := parse(nil)
	got := applyGC(st, c.gcPercent, c.memLimit, func(string) string { return "" })
	check("defaults", got, defaultGCPercent, defaultMemoryLimit, false)
	got.restore()
	if p, l := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); p != 100 || l != wasLimit {
		t.Errorf("restored to %d and %d bytes, want 100 and %d", p, l, wasLimit)
	}

	debug.SetGCPercent(50) // as the runtime reads GOGC=50 at start
	debug.SetMemoryLimit(300 << 20)
	env := map[string]string{"GOGC": "50", "GOMEMLIMIT": "300MiB"}
	st, c = parse(env)
	check("Go's env", applyGC(st, c.gcPercent, c.memLimit, func(k string) string { return env[k] }), 50, 300, true)

	st, c = parse(env, "--gc-percent", "200", "--memory-limit", "0")
	check("flags over Go's env", applyGC(st, c.gcPercent, c.memLimit, func(k string) string { return env[k] }), 200, 0, false)
}

// TestCheckGC: a GC percent below -1 or a negative limit is a
// configuration error naming the setting.
func TestCheckGC(t *testing.T) {
	for _, args := range [][]string{{"--gc-percent", "-2"}, {"--memory-limit", "-1"}} {
		var c serveConfig
		st := serveSettings(&c)
		if err := st.parse("serve", append(args, "--ami-user", "u", "--ami-secret", "s"), func(string) string { return "" }, io.Discard); err != nil {
			t.Fatal(err)
		}
		_, probs := checkServe(&c, st)
		err := firstError(probs)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: %v", args, err)
		}
	}
}
