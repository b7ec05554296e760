package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// loadtestSynth is `ctibridge-lab loadtest synth`: a synthetic AMI
// (loadtest.SynthAMI) with --exts extensions holding --calls calls up,
// a bridge process following it, and loadtest.RunSynth.
func loadtestSynth(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c commonFlags
	c.register(fs, getenv)
	var cfg loadtest.SynthConfig
	var size loadtest.SynthPBX
	var logLevel, serveAMI, stamps, bin string
	fs.IntVar(&size.Extensions, "exts", 5000, "extensions of the synthetic PBX (2000 and up)")
	fs.IntVar(&size.Queues, "queues", 0, "queues (q1 dialled 601, q2 602, ...), ringall, of --members static members each: the first extensions")
	fs.IntVar(&size.Members, "members", 20, "static members of each queue (they take only queue calls)")
	fs.IntVar(&cfg.Calls, "calls", 2000, "calls held up (each call not into a queue needs two extensions that are no queue's members)")
	fs.Float64Var(&cfg.QueueShare, "queue-share", 0, "share of the new calls that are outside callers into a queue (needs --queues)")
	fs.Float64Var(&cfg.TrunkShare, "trunk-share", 0, "share of the new calls on the trunk, half inbound to an extension, half outbound")
	fs.Float64Var(&cfg.TransferShare, "transfer-share", 0, "share of the new calls that are internal calls transferred, half blind (Redirect), half attended (Atxfer)")
	fs.Float64Var(&cfg.ForwardShare, "forward-share", 0, "share of the new calls that are outside callers to an extension forwarded (AstDB CF) to an outside number: trunk in, trunk out")
	fs.Float64Var(&cfg.Rate, "r", 50, "new calls per second in the steady phase (each lasts calls/r seconds)")
	fs.DurationVar(&cfg.Ring, "ring", time.Second, "how long a callee rings before it answers")
	fs.DurationVar(&cfg.Duration, "d", 20*time.Second, "the steady phase")
	fs.IntVar(&cfg.Clients, "c", 5, "WebSocket screens watching every extension")
	fs.Float64Var(&cfg.RESTRate, "rest-rate", 5, "REST reads of every extension (GET /astproxy/extensions) per second (negative: none)")
	fs.StringVar(&logLevel, "log-level", "error", "log level of the bridge")
	fs.StringVar(&bin, "bin", "", binHelp)
	fs.StringVar(&serveAMI, "serve-ami", "", "serve only the synthetic AMI on this address (user ctibridge, secret synth) for bridges started elsewhere, with -d 0 until interrupted; nothing measured (docs/scale-out.md)")
	fs.StringVar(&stamps, "stamps", "", "with --serve-ami: append a line per call, \"<callee> <Unix ns>\", when it starts (ctibridge-lab wsbench -stamps)")
	c.screenLimits(fs)
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	if size.Queues == 0 {
		size.Members = 0
	}
	if err := loadtest.CheckSynth(size, cfg.SynthTraffic); err != nil {
		return err
	}
	log, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Progress = c.progressFunc(stderr, "calls")
	if serveAMI != "" {
		return serveSynthAMI(ctx, serveAMI, stamps, size, cfg, log, stdout)
	}
	if stamps != "" {
		return errors.New("loadtest synth: --stamps needs --serve-ami")
	}
	if bin, err = bridgeBinary(ctx, bin, getenv, stderr); err != nil {
		return fmt.Errorf("loadtest synth: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pbx, err := loadtest.NewSynthAMI(ctx, "127.0.0.1:0", size, synthUser, synthSecret, log.With("component", "synth-ami"))
	if err != nil {
		return err
	}
	defer pbx.Close()
	return withBridge(ctx, bridgeRun{bin, logLevel, stderr}, pbx.Addr(), synthUser, synthSecret, nil, func(b testBridge) error {
		cfg.AMI, cfg.HTTP, cfg.Admin, cfg.Token, cfg.BridgePID = pbx, b.http, b.admin, b.token, b.pid
		if c.admin == "" {
			c.admin = b.admin
		}
		wait, err := c.startProfile(ctx, cfg.Duration)
		if err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintf(stdout, "Running synth test: %d extensions, %d calls up, %.0f calls/s for %v, bridge %s, %d WebSocket clients\n",
				size.Extensions, cfg.Calls, cfg.Rate, cfg.Duration, cfg.HTTP, cfg.Clients)
		}
		rep, err := loadtest.RunSynth(ctx, cfg)
		if err != nil {
			return errors.Join(err, discard(wait))
		}
		return c.finish(rep, wait(), stdout, stderr)
	})
}

// discard waits for a profile capture that will not be reported.
func discard(wait func() *loadtest.ProfileResult) error {
	wait()
	return nil
}
