package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/ctibridge/ctibridge/loadtest"
)

// loadtestE2EBridge is `ctibridge-lab loadtest e2e-bridge --pairs N --bin
// BIN`, the child process of `loadtest e2e`: pbxsim with 2*N extensions
// and a bridge process (BIN serve) on it, announced on stdout and serving
// the PBX's channels on request until stdin ends
// (loadtest.ServeE2EBridge).
func loadtestE2EBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("e2e-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pairs := fs.Int("pairs", 0, "caller/callee pairs")
	logLevel := fs.String("log-level", "error", "log level of the bridge and pbxsim")
	plan := fs.String("pbx-plan", "default", "dialplan of pbxsim: default or freepbx")
	bin := fs.String("bin", "", "the ctibridge binary")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	if *pairs <= 0 || *bin == "" {
		return errors.New("loadtest e2e-bridge: --pairs must be positive, --bin given")
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	return withTestBridge(ctx, bridgeRun{*bin, *logLevel, stderr}, *pairs, *plan, log, func(b testBridge) error {
		return loadtest.ServeE2EBridge(ctx, loadtest.E2EBridge{SIP: b.sip, HTTP: b.http, Admin: b.admin, Token: b.token, Exts: b.exts,
			Dial: b.dial, Devices: b.devices, BridgePID: b.pid}, b.channels, os.Stdin, stdout)
	})
}

// e2eWithChild runs an e2e run against pbxsim (its dialplan plan) in a
// child process of this binary and a bridge process (bin serve) that
// child starts, so that the screens and the calls' driver take none of
// the bridge's CPU or GC.
func e2eWithChild(ctx context.Context, c *commonFlags, cfg loadtest.E2EConfig, bin string, pairs int, plan, logLevel string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("loadtest e2e: %w", err)
	}
	// The child's standard error is copied from a goroutine of its own:
	// only a file may take that beside this process's writes.
	childErr, ok := stderr.(*os.File)
	if !ok {
		childErr = os.Stderr
	}
	child, err := loadtest.StartE2EChild(ctx, self, []string{"loadtest", "e2e-bridge", "--pairs", strconv.Itoa(pairs), "--pbx-plan", plan,
		"--log-level", logLevel, "--bin", bin}, childErr)
	if err != nil {
		return err
	}
	defer child.Stop()
	if len(child.Exts) != 2*pairs {
		return fmt.Errorf("loadtest e2e: the bridge process has %d extensions, want %d", len(child.Exts), 2*pairs)
	}
	cfg.SIPAddr, cfg.HTTP, cfg.Token = child.SIP, child.HTTP, child.Token
	cfg.Callers, cfg.Callees = child.Exts[:pairs], child.Exts[pairs:]
	cfg.Dial, cfg.Devices = child.Dial, child.Devices
	cfg.PBXChannels, cfg.BridgePID = child.Channels, child.BridgePID
	if c.admin == "" {
		c.admin = child.Admin
	}
	cfg.Admin = c.admin
	err = runE2E(ctx, c, cfg, stdout, stderr)
	if serr := child.Stop(); serr != nil {
		fmt.Fprintln(stderr, "loadtest e2e: the bridge process:", serr)
	}
	return err
}
