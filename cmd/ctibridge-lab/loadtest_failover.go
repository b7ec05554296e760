package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/bus"
	"github.com/ctibridge/ctibridge/loadtest"
)

// loadtestFailover is `ctibridge-lab loadtest failover`: the scale-out
// topology (3 nats-servers, two bridges and the edges as ctibridge child
// processes, pbxsim, SIPp, PostgreSQL) with the leading bridge killed
// with SIGKILL again and again (docs/loadtest.md).
func loadtestFailover(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg loadtest.FailoverConfig
	var sf suiteFlags
	sf.register(fs, "bridges and edges", "exit 1 when an issue target is missed (takeover p99 within 5 s), not only an invariant")
	fs.IntVar(&cfg.Kills, "kills", 20, "how many times the leading bridge is killed")
	fs.IntVar(&cfg.Edges, "edges", 2, "edge nodes (ctibridge edge)")
	fs.Float64Var(&cfg.Rate, "r", 5, "SIPp calls per second")
	fs.DurationVar(&cfg.Talk, "talk", 2*time.Second, "how long each call lasts")
	fs.DurationVar(&cfg.Settle, "settle", 2*time.Second, "calls under a steady leader between two kills, once the killed bridge is back")
	fs.DurationVar(&cfg.KillTimeout, "kill-timeout", 30*time.Second, "a kill not taken over (lease, every edge live) within this fails the run")
	fs.DurationVar(&cfg.RestartDelay, "restart-delay", time.Second, "how long a killed bridge stays dead before it is started again as a standby")
	fs.DurationVar(&cfg.Grace, "grace", time.Second, "how long pbxsim's truth must hold before a client that disagrees counts")
	fs.IntVar(&cfg.NATSKills, "nats-kills", 0, "how many times one of the 3 nats-servers is killed (each in turn; 0: 3, -1: none)")
	fs.DurationVar(&cfg.NATSDown, "nats-down", 10*time.Second, "how long a killed nats-server stays dead while calls run")
	fs.IntVar(&cfg.EdgeKills, "edge-kills", 0, "how many times an edge is killed (each in turn; its clients resume on another; 0: 2 with 2 edges or more, -1: none)")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "how many times the leading bridge is cut off from NATS by a network namespace while REST actions are asked of it (needs root: skipped, with the reason, otherwise; 0: 5, -1: none)")
	fs.DurationVar(&cfg.MaxLive, "max-live", 0, "fail (an invariant) when the edges are live again later than this after a kill (0: no bound)")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	log, err := sf.setup(ctx, "failover", getenv, stderr)
	if err != nil {
		return err
	}
	// sipgo and nats log through the process-wide default logger.
	slog.SetDefault(log)
	cfg.Binary, cfg.ServeArgs, cfg.Dir, cfg.Keep, cfg.Log = sf.bin, sf.serveArgs, sf.dir, sf.keep, log
	cfg.LeaseTTL, cfg.LeaseBucket = bus.DefaultLeaseTTL, bus.LeaseBucket
	rep, err := loadtest.RunFailover(ctx, cfg)
	if rep != nil {
		sf.print(stdout, rep)
	}
	if err != nil {
		return err
	}
	var strictOn []string
	if sf.strict {
		strictOn = []string{"failover"}
	}
	if failed := rep.Failed(strictOn...); len(failed) > 0 {
		return errors.New("loadtest failover: failed: " + strings.Join(failed, "; "))
	}
	return nil
}
