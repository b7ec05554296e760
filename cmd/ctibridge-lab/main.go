// Command ctibridge-lab is ctibridge's load and fault lab: the load
// generators and suites (loadtest), the WebSocket hub's bench (wsbench)
// and the REST read bench's server (restbench). It is not shipped: the
// packaged ctibridge holds none of it (deps_test.go). Where a run needs a
// bridge it starts the ctibridge binary as a process of its own (bin.go
// says which binary).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ctibridge/ctibridge/loadtest/wsbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "ctibridge-lab:", err)
		os.Exit(1)
	}
}

const usage = `ctibridge-lab: ctibridge's load and fault lab (not shipped)

Usage:
  ctibridge-lab loadtest http|ws|e2e|chaos|failover|synth ...  load a bridge and report (docs/loadtest.md)
  ctibridge-lab wsbench [flags]     the WebSocket hub alone over loopback, thousands of clients
  ctibridge-lab restbench [flags]   serve the REST read's bytes through rest or a bare handler, for wrk

The runs that need a bridge start ctibridge serve as a process of their
own: --bin, else $CTIBRIDGE_BIN, else ctibridge beside this binary, else
built from the source tree the command runs in, else ctibridge on $PATH.
`

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "loadtest":
		return runLoadtest(ctx, args[1:], getenv, stdout, stderr)
	case "restbench":
		return restBench(ctx, args[1:], stderr)
	case "wsbench":
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return wsbench.Run([]string{self, "wsbench"}, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// newLogger is a text logger at level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.LevelVar
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: &lv})), nil
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
