package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// loadtestFailover is `ctibridge loadtest failover`: the scale-out
// topology (3 nats-servers, two bridges and the edges as child processes
// of this binary, pbxsim, SIPp, PostgreSQL) with the leading bridge
// killed with SIGKILL again and again (docs/loadtest.md).
func loadtestFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg loadtest.FailoverConfig
	var serveArgs listFlag
	var jsonOut, strict bool
	var logLevel string
	fs.StringVar(&cfg.Binary, "bin", "", "ctibridge binary to run as serve and edge (default: this one)")
	fs.Var(&serveArgs, "serve-arg", "extra argument for every bridge and edge (repeatable)")
	fs.IntVar(&cfg.Kills, "kills", 20, "how many times the leading bridge is killed")
	fs.IntVar(&cfg.Edges, "edges", 2, "edge nodes (ctibridge edge)")
	fs.Float64Var(&cfg.Rate, "r", 5, "SIPp calls per second")
	fs.DurationVar(&cfg.Talk, "talk", 2*time.Second, "how long each call lasts")
	fs.DurationVar(&cfg.Settle, "settle", 2*time.Second, "calls under a steady leader between two kills, once the killed bridge is back")
	fs.DurationVar(&cfg.KillTimeout, "kill-timeout", 30*time.Second, "a kill not taken over (lease, every edge live) within this fails the run")
	fs.DurationVar(&cfg.RestartDelay, "restart-delay", time.Second, "how long a killed bridge stays dead before it is started again as a standby")
	fs.DurationVar(&cfg.Grace, "grace", time.Second, "how long pbxsim's truth must hold before a client that disagrees counts")
	fs.DurationVar(&cfg.MaxLive, "max-live", 0, "fail (an invariant) when the edges are live again later than this after a kill (0: no bound)")
	fs.StringVar(&cfg.Dir, "dir", "", "work directory (the nodes' logs and data, the NATS stores); default a temporary one, removed unless --keep")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work directory")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	fs.BoolVar(&strict, "strict", false, "exit 1 when an issue target is missed (takeover p99 within 5 s), not only an invariant")
	fs.StringVar(&logLevel, "log-level", "warn", "log level of the run's progress (info: one line per kill)")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	if cfg.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("loadtest failover: --bin: %w", err)
		}
		cfg.Binary = self
	}
	log, err := newLogger(stderr, "text", logLevel)
	if err != nil {
		return err
	}
	// sipgo and nats log through the process-wide default logger.
	slog.SetDefault(log)
	cfg.ServeArgs, cfg.Log = serveArgs, log
	rep, err := loadtest.RunFailover(ctx, cfg)
	if rep != nil {
		if jsonOut {
			stdout.Write(rep.JSON())
		} else {
			rep.WriteText(stdout)
		}
	}
	if err != nil {
		return err
	}
	var strictOn []string
	if strict {
		strictOn = []string{"failover"}
	}
	if failed := rep.Failed(strictOn...); len(failed) > 0 {
		return errors.New("loadtest failover: failed: " + strings.Join(failed, "; "))
	}
	return nil
}
