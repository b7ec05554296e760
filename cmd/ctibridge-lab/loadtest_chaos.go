package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// loadtestChaos is `ctibridge-lab loadtest chaos`: the fault suite
// against pbxsim, SIPp and ctibridge run as `serve` (docs/loadtest.md).
func loadtestChaos(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg loadtest.ChaosConfig
	var scenarios, faults, strictTargets string
	var sf suiteFlags
	var rssCapMB uint64
	sf.register(fs, "serve", "exit 1 when an issue target is missed, not only an invariant (--strict-targets ami,db,ws)")
	fs.DurationVar(&cfg.AMIPing, "ami-ping", 0, "passed to serve as --ami-ping when it has that flag (0: serve's own default)")
	fs.StringVar(&scenarios, "scenarios", "ami,db,ws", "scenarios to run, in order: ami, db, ws")
	fs.Float64Var(&cfg.Rate, "r", 10, "SIPp calls per second")
	fs.DurationVar(&cfg.Talk, "talk", 2*time.Second, "how long each call lasts")
	fs.DurationVar(&cfg.AMIDuration, "ami-d", time.Minute, "ami: how long faults are injected")
	fs.StringVar(&faults, "faults", "kill,halfopen,longline,partition", "ami: faults injected in turn (partition: a network namespace's link taken down, as root)")
	fs.DurationVar(&cfg.FaultMax, "fault-max", 30*time.Second, "ami: a fault not noticed after this is ended by cutting the link")
	fs.DurationVar(&cfg.Settle, "settle", 3*time.Second, "ami: sampling after the bridge is live again, before the next fault")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", 100*time.Millisecond, "ami: period of the truth samples (20 ms during a fault)")
	fs.DurationVar(&cfg.Grace, "grace", 500*time.Millisecond, "ami: how long pbxsim's truth must hold before a disagreeing sample counts")
	fs.DurationVar(&cfg.DBDuration, "db-d", time.Minute, "db: how long calls are placed and serve is killed")
	fs.DurationVar(&cfg.DBDown, "db-down", 10*time.Second, "db: how long the database is down after serve starts")
	fs.DurationVar(&cfg.KillEvery, "kill-every", 10*time.Second, "db: mean time between two kill -9 of serve")
	fs.DurationVar(&cfg.CDRInFlight, "cdr-in-flight", 20*time.Millisecond, "db: a Cdr handed to serve this long before a kill -9 may be lost unread (not counted as lost)")
	fs.DurationVar(&cfg.RestartDelay, "restart-delay", time.Second, "db: pause before serve is started again after it exited")
	fs.IntVar(&cfg.WSClients, "ws-clients", 200, "ws: clients whose latency is measured")
	fs.DurationVar(&cfg.WSDuration, "ws-d", 10*time.Second, "ws: length of each phase (without, then with the flood)")
	fs.Uint64Var(&rssCapMB, "flood-rss-cap", 512, "ws: stop the flood when serve's RSS has grown this many MB")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "db: seed of the kill instants (0: random; the report prints it)")
	fs.StringVar(&strictTargets, "strict-targets", "", "scenarios whose issue targets make the exit code 1 (comma-separated)")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	log, err := sf.setup(ctx, "chaos", getenv, stderr)
	if err != nil {
		return err
	}
	if sf.strict {
		strictTargets = "ami,db,ws"
	}
	for _, s := range splitList(strictTargets) {
		if s != "ami" && s != "db" && s != "ws" {
			return fmt.Errorf("loadtest chaos: --strict-targets: unknown scenario %q (ami, db, ws)", s)
		}
	}
	cfg.Binary, cfg.ServeArgs, cfg.Dir, cfg.Keep = sf.bin, sf.serveArgs, sf.dir, sf.keep
	cfg.Scenarios, cfg.Faults = splitList(scenarios), splitList(faults)
	cfg.FloodRSSCap, cfg.Log = rssCapMB<<20, log
	rep, err := loadtest.RunChaos(ctx, cfg)
	if rep != nil {
		sf.print(stdout, rep)
	}
	if err != nil {
		return err
	}
	if failed := rep.Failed(splitList(strictTargets)...); len(failed) > 0 {
		return errors.New("loadtest chaos: failed: " + strings.Join(failed, "; "))
	}
	return nil
}
