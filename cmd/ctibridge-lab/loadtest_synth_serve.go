package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// The synthetic AMI's manager login.
const synthUser, synthSecret = "ctibridge", "synth"

// serveSynthAMI is `loadtest synth --serve-ami ADDR`: the synthetic PBX
// and its calls (loadtest.ServeSynth) for bridges started elsewhere, such
// as bench/edges.sh's `serve --bus` bridge and plain `serve`. It prints
// the address once it listens and, at the end (-d, or interrupted with
// -d 0), what it did as one JSON line.
func serveSynthAMI(ctx context.Context, addr, stampsPath string, size loadtest.SynthPBX, cfg loadtest.SynthConfig, log *slog.Logger, stdout io.Writer) error {
	pbx, err := loadtest.NewSynthAMI(context.Background(), addr, size, synthUser, synthSecret, log.With("component", "synth-ami"))
	if err != nil {
		return err
	}
	defer pbx.Close()
	sc := loadtest.SynthServeConfig{AMI: pbx, SynthTraffic: cfg.SynthTraffic}
	if stampsPath != "" {
		f, err := os.OpenFile(stampsPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		sc.Stamps = f
	}
	fmt.Fprintf(stdout, "synthetic AMI on %s (user %s, secret %s): %d extensions, %d calls up, %g new calls/s\n",
		pbx.Addr(), synthUser, synthSecret, size.Extensions, cfg.Calls, cfg.Rate)
	done, err := loadtest.ServeSynth(ctx, sc)
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the hangups reach the bridges before the server closes
	return json.NewEncoder(stdout).Encode(map[string]any{"calls": done.Calls, "skipped": done.Skipped, "events": done.Events,
		"calls_up_max": done.MaxUp, "seconds": done.Duration.Seconds()})
}
