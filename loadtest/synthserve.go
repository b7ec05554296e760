package loadtest

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// SynthServeConfig is `loadtest synth --serve-ami`: the synthetic PBX of
// RunSynth with its calls, for bridges this run does not start (several
// may follow it: a `serve --bus` bridge and a plain `serve` see the same
// events at the same time), and nothing measured here: the screens are
// measured by their own tool, against Stamps.
type SynthServeConfig struct {
	AMI *SynthAMI
	SynthTraffic
	// Duration (SynthTraffic's) 0: until ctx ends.

	// Stamps, when not nil, gets one line per internal call of the steady
	// phase, "<callee> <Unix ns>\n", the time taken just before the call's
	// first event is queued to the bridges (the callee rings with the
	// call's eighth event, microseconds later): what a screen's ringing is
	// timed from (ctibridge-lab wsbench -stamps). A line is written once per
	// call, as the call starts, so a reader finds the stamp of every
	// ringing it saw.
	Stamps io.Writer
}

// SynthServed is what ServeSynth did.
type SynthServed struct {
	Calls    int // internal calls placed in the steady phase (those Stamps has)
	Skipped  int // calls not placed: too few idle extensions
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
	tr := cfg.SynthTraffic
	if tr.Duration <= 0 {
		tr.Duration = 100 * 365 * 24 * time.Hour // until ctx ends
	}
	tr.setDefaults()
	g, err := newSynthGen(cfg.AMI, tr)
	if err != nil {
		return SynthServed{}, err
	}
	if cfg.Stamps != nil {
		var line []byte
		g.stamp = func(callee int, t time.Time) {
			line = append(append(append(line[:0], synthpbx.Exten(callee)...), ' '), strconv.FormatInt(t.UnixNano(), 10)...)
			cfg.Stamps.Write(append(line, '\n')) // unbuffered: a reader finds every stamp of the calls placed
		}
	}
	g.fill(tr.Calls)
	start := time.Now()
	g.steady(ctx, tr, start)
	out := SynthServed{Calls: len(g.recs), Duration: time.Since(start)}
	g.ami.do(func(*synthpbx.PBX) { out.Skipped, out.MaxUp = g.gen.Skipped, g.gen.MaxUp })
	g.hangupAll()
	out.Events = cfg.AMI.Events()
	return out, nil
}
