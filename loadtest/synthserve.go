package loadtest

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"
)

// SynthServeConfig is `loadtest synth --serve-ami`: the synthetic PBX of
// RunSynth with its calls, for bridges this run does not start (several
// may follow it: a `serve --bus` bridge and a plain `serve` see the same
// events at the same time), and nothing measured here: the screens are
// measured by their own tool, against Stamps.
type SynthServeConfig struct {
	AMI      *SynthAMI
	Calls    int           // calls held up; 2*Calls+2 <= the extensions
	Rate     float64       // new calls a second; each lasts Calls/Rate seconds
	Ring     time.Duration // how long a callee rings before it answers
	Duration time.Duration // the steady phase; 0: until ctx ends
	// Stamps, when not nil, gets one line per call of the steady phase,
	// "<callee> <Unix ns>\n", the time taken just before the call's first
	// event is queued to the bridges (the callee rings with the call's
	// sixth event, microseconds later): what a screen's ringing is timed
	// from (loadtest/wsbench -stamps). A line is written once per call, as
	// the call starts, so a reader finds the stamp of every ringing it saw.
	Stamps io.Writer
}

// SynthServed is what ServeSynth did.
type SynthServed struct {
	Calls    int // calls placed in the steady phase
	Skipped  int // calls not placed: no two extensions free
	Events   uint64
	MaxUp    int
	Duration time.Duration // of the steady phase
}

// ServeSynth holds cfg.Calls answered calls up on cfg.AMI (placed at once
// and answered, their hangups spread over one call's length, as RunSynth's
// fill) and starts and ends calls at cfg.Rate until cfg.Duration has passed
// or ctx ends, then hangs every call up. It returns when the hangups are
// queued to the bridges.
func ServeSynth(ctx context.Context, cfg SynthServeConfig) (SynthServed, error) {
	sc := SynthConfig{AMI: cfg.AMI, Calls: cfg.Calls, Rate: cfg.Rate, Ring: cfg.Ring, Duration: cfg.Duration}
	sc.setDefaults()
	if cfg.Duration <= 0 {
		sc.Duration = 100 * 365 * 24 * time.Hour // until ctx ends
	}
	if 2*sc.Calls+2 > cfg.AMI.exts {
		return SynthServed{}, fmt.Errorf("loadtest: synth: %d calls need %d extensions, have %d", sc.Calls, 2*sc.Calls+2, cfg.AMI.exts)
	}
	hold := time.Duration(float64(sc.Calls) / sc.Rate * float64(time.Second))
	if hold <= sc.Ring {
		return SynthServed{}, fmt.Errorf("loadtest: synth: %d calls at %g/s last %v, not longer than the ring time %v", sc.Calls, sc.Rate, hold, sc.Ring)
	}
	g := &synthGen{ami: cfg.AMI, free: make([]int, cfg.AMI.exts)}
	for i := range g.free {
		g.free[i] = i
	}
	if cfg.Stamps != nil {
		var line []byte
		g.stamp = func(callee int, t time.Time) {
			line = append(append(append(line[:0], SynthExten(callee)...), ' '), strconv.FormatInt(t.UnixNano(), 10)...)
			cfg.Stamps.Write(append(line, '\n')) // unbuffered: a reader finds every stamp of the calls placed
		}
	}
	t0 := time.Now()
	for i := range sc.Calls {
		c := g.dial(-1)
		cfg.AMI.Answer(c.c)
		c.up = t0.Add(hold * time.Duration(i+1) / time.Duration(sc.Calls))
	}
	start := time.Now()
	g.steady(ctx, sc, start, hold)
	out := SynthServed{Calls: len(g.recs), Skipped: g.skipped, MaxUp: g.maxUp, Duration: time.Since(start)}
	g.hangupAll()
	out.Events = cfg.AMI.Events()
	return out, nil
}
