// Command ctibridge is the CTI bridge between an Asterisk PBX and the people
// who handle calls. See the README for the commands; each lives in its own
// file here and only wires packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], sysIO{os.Getenv, os.Stdin, os.Stdout, os.Stderr})
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "ctibridge:", err)
		if _, ok := errors.AsType[configError](err); ok {
			os.Exit(78) // EX_CONFIG: the unit does not restart it
		}
		os.Exit(1)
	}
}

const usage = `ctibridge: a CTI bridge for Asterisk

Usage:
  ctibridge demo   [flags]            everything on loopback: simulated PBX and phones, the bridge, the panel
  ctibridge serve  [flags]            run the bridge against a PBX (see --help)
  ctibridge edge   --bus URL [flags]  serve a PBX's state from the bus, without an AMI link (docs/scale-out.md)
  ctibridge replay FILE.ami [--at N]  print the state a recorded AMI stream leads to
  ctibridge pbxsim [flags]            run the simulated PBX alone (SIP + AMI), for SIPp
  ctibridge migrate [--db DSN]        apply the database migrations (serve does it at start too)
  ctibridge check-config [flags]      check serve's configuration and the files it names; report every problem
  ctibridge passwd                    print a bcrypt hash for the users file (reads the password from stdin)
  ctibridge users import|list ...     add users from a CSV to the users file; list the users (file and directories)
  ctibridge version                   print the version
`

// sysIO is what a command reads and writes of the process: its
// environment and standard streams.
type sysIO struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, sys sysIO) error {
	getenv, stdin, stdout, stderr := sys.getenv, sys.stdin, sys.stdout, sys.stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], getenv, stdout, stderr)
	case "serve":
		return serve(ctx, args[1:], getenv, stderr)
	case "edge":
		return serve(ctx, edgeArgs(args[1:]), getenv, stderr)
	case "check-config":
		return runCheckConfig(args[1:], getenv, stdout, stderr)
	case "replay":
		return replay(args[1:], stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args[1:], getenv, stderr)
	case "passwd":
		return runPasswd(stdin, stdout, stderr)
	case "users":
		return runUsers(ctx, args[1:], getenv, stdout, stderr)
	case "pbxsim":
		return runPBXSim(ctx, args[1:], getenv, stderr)
	case "version":
		fmt.Fprintln(stdout, "ctibridge", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
