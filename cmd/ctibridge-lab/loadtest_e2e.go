package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
	"github.com/ctibridge/ctibridge/pbxsim"
)

func loadtestE2E(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c commonFlags
	c.register(fs, getenv)
	var cfg loadtest.E2EConfig
	var attach, sipAddr, callers, callees, logLevel, bin string
	var pairs int
	var inProcess bool
	plan := pbxsim.PlanDefault
	fs.StringVar(&plan, "pbx-plan", plan, "dialplan of the simulated PBX: default or freepbx (docs/pbxsim.md)")
	fs.StringVar(&attach, "attach", "", "REST root of a running bridge (http://127.0.0.1:8080); default: start pbxsim in a child process and a ctibridge serve process")
	fs.BoolVar(&inProcess, "in-process", false, "start pbxsim in this process, beside the screens (the bridge is a ctibridge process of its own either way)")
	fs.StringVar(&bin, "bin", "", binHelp)
	fs.StringVar(&sipAddr, "sip", "", "with --attach: the PBX's SIP address host:port")
	fs.StringVar(&callers, "callers", "", "with --attach: caller extensions, a range like 200-249")
	fs.StringVar(&callees, "callees", "", "with --attach: callee extensions, as many as callers")
	fs.StringVar(&cfg.Secret, "sip-secret", "", "SIP digest password of the phones, if the PBX asks for one")
	fs.IntVar(&pairs, "pairs", 0, "without --attach: caller/callee pairs (default: enough for the rate)")
	fs.Float64Var(&cfg.Rate, "r", 10, "calls placed per second")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "how long calls are placed")
	fs.DurationVar(&cfg.Ring, "ring", 100*time.Millisecond, "how long a callee rings before it answers")
	fs.DurationVar(&cfg.Talk, "talk", time.Second, "how long an answered call lasts")
	fs.IntVar(&cfg.Clients, "c", 5, "WebSocket clients watching")
	fs.Float64Var(&cfg.RESTRate, "rest-rate", 20, "REST reads (GET /astproxy/extensions) per second during the run (negative: none)")
	fs.StringVar(&cfg.Generator, "generator", "", "sipp or phones (default: sipp when installed)")
	fs.StringVar(&logLevel, "log-level", "error", "without --attach: log level of the bridge and pbxsim")
	c.screenLimits(fs)
	maxFailed := fs.Int64("max-failed", -1, "fail when more calls were not answered (-1: no limit)")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	c.counterLimit["calls_failed"] = maxFailed
	log, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Log = log
	// sipgo logs through the process-wide default logger (retransmissions
	// of a loaded run at Info): keep it at --log-level.
	slog.SetDefault(log)
	cfg.Progress = c.progressFunc(stderr, "calls")
	if attach != "" {
		if sipAddr == "" || callers == "" || callees == "" {
			return errors.New("loadtest e2e: --attach needs --sip, --callers and --callees")
		}
		if cfg.Callers, err = pbxsim.ParseRange(callers); err != nil {
			return fmt.Errorf("--callers: %w", err)
		}
		if cfg.Callees, err = pbxsim.ParseRange(callees); err != nil {
			return fmt.Errorf("--callees: %w", err)
		}
		cfg.SIPAddr, cfg.HTTP = sipAddr, strings.TrimSuffix(attach, "/")
		if err := c.login(ctx, cfg.HTTP); err != nil {
			return err
		}
		cfg.Token, cfg.Admin = c.token, c.admin
		return runE2E(ctx, &c, cfg, stdout, stderr)
	}
	if pairs <= 0 {
		pairs = int(cfg.Rate*(cfg.Ring+cfg.Talk+300*time.Millisecond).Seconds()*1.5) + 5
	}
	if bin, err = bridgeBinary(ctx, bin, getenv, stderr); err != nil {
		return fmt.Errorf("loadtest e2e: %w", err)
	}
	if !inProcess {
		return e2eWithChild(ctx, &c, cfg, bin, pairs, plan, logLevel, stdout, stderr)
	}
	return withTestBridge(ctx, bridgeRun{bin, logLevel, stderr}, pairs, plan, log, func(b testBridge) error {
		cfg.SIPAddr, cfg.HTTP, cfg.Token = b.sip, b.http, b.token
		cfg.Callers, cfg.Callees = b.exts[:pairs], b.exts[pairs:]
		cfg.Dial, cfg.Devices = b.dial, b.devices
		cfg.PBXChannels, cfg.BridgePID = b.channels, b.pid
		if c.admin == "" {
			c.admin = b.admin
		}
		cfg.Admin = c.admin
		return runE2E(ctx, &c, cfg, stdout, stderr)
	})
}

func runE2E(ctx context.Context, c *commonFlags, cfg loadtest.E2EConfig, stdout, stderr io.Writer) error {
	wait, err := c.startProfile(ctx, cfg.Duration)
	if err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(stdout, "Running %v e2e test: %.0f calls/s through SIP %s, bridge %s, %d WebSocket clients\n",
			cfg.Duration, cfg.Rate, cfg.SIPAddr, cfg.HTTP, cfg.Clients)
	}
	rep, err := loadtest.RunE2E(ctx, cfg)
	if err != nil {
		return err
	}
	return c.finish(rep, wait(), stdout, stderr)
}

// testBridge is a bridge process on a PBX: pbxsim in this process
// (withTestBridge) or a synthetic one.
type testBridge struct {
	sip, http, admin, token string
	pid                     int               // the bridge's process
	exts                    []string          // 2*pairs extensions, 3000 and up
	dial                    map[string]string // E2EConfig.Dial, E2EConfig.Devices (freepbxLoad)
	devices                 []string
	channels                func() []string // pbxsim's live channels
}

// bridgeRun says how a run starts its bridge: the ctibridge binary and
// serve's log level; serve's standard error is stderr when that is a
// file (only a file may take a child's writes beside this process's),
// else this process's.
type bridgeRun struct {
	bin, logLevel string
	stderr        io.Writer
}

// withTestBridge starts pbxsim (its dialplan plan) with 2*pairs
// extensions in this process and a bridge process on it (withBridge),
// runs f, then stops both.
func withTestBridge(ctx context.Context, br bridgeRun, pairs int, plan string, log *slog.Logger, f func(testBridge) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var exts []pbxsim.Extension
	var names []string
	for i := range 2 * pairs {
		n := strconv.Itoa(3000 + i)
		exts = append(exts, pbxsim.Extension{Number: n})
		names = append(names, n)
	}
	pcfg := pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0", Extensions: exts, Plan: plan, Log: log.With("component", "pbxsim")}
	var dial map[string]string
	var devices []string
	if plan == pbxsim.PlanFreePBX {
		dial, devices = freepbxLoad(&pcfg, names[pairs:])
	}
	pbx, err := pbxsim.New(pcfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	errc := make(chan error, 1)
	wg.Go(func() {
		if err := pbx.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("pbxsim: %w", err)
		}
	})
	return withBridge(ctx, br, pbx.AMIAddr(), pbxsim.DefaultAMIUser, pbxsim.DefaultAMISecret, errc, func(b testBridge) error {
		b.sip, b.exts, b.channels = pbx.SIPAddr(), names, pbx.Channels
		b.dial, b.devices = dial, devices
		return f(b)
	})
}

// freepbxLoad puts the freepbx plan's Local-channel topologies into an
// e2e load on callees, each rung by its own pair: the first is the only
// member of the queue (Local/<m>@from-queue/n), every third from the
// second the only member of a ring group of its own (6<callee>,
// Local/<m>@from-internal/n), every third from the third a user with a
// second device (9<callee>, registered, never answering, rung with it);
// the rest are called directly. It gives E2EConfig's Dial and Devices.
func freepbxLoad(cfg *pbxsim.Config, callees []string) (dial map[string]string, devices []string) {
	dial = map[string]string{}
	cfg.RingGroups, cfg.Devices = map[string][]string{}, map[string]string{}
	for i, c := range callees {
		switch {
		case i == 0:
			cfg.Queue, cfg.QueueNumber, cfg.QueueMembers = pbxsim.DefaultFreePBXQueue, pbxsim.DefaultFreePBXQueue, []string{c}
			dial[c] = pbxsim.DefaultFreePBXQueue
		case i%3 == 1:
			cfg.RingGroups["6"+c] = []string{c}
			dial[c] = "6" + c
		case i%3 == 2:
			cfg.Devices["9"+c] = c
			devices = append(devices, "9"+c)
		}
	}
	return dial, devices
}

// withBridge starts `ctibridge serve` as a process of its own on the
// manager at amiAddr (loadtest.StartBridge: serve's defaults, loopback,
// a temporary data directory, one admin logged in), runs f, then stops
// it. An error on pbxErr (the PBX's) while the bridge starts ends the
// wait.
func withBridge(ctx context.Context, br bridgeRun, amiAddr, amiUser, amiSecret string, pbxErr <-chan error, f func(testBridge) error) error {
	stderr, ok := br.stderr.(*os.File)
	if !ok {
		stderr = os.Stderr
	}
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	pbxDied := make(chan error, 1)
	go func() {
		select {
		case err := <-pbxErr:
			pbxDied <- err
			cancel()
		case <-startCtx.Done():
		}
	}()
	b, err := loadtest.StartBridge(startCtx, loadtest.BridgeConfig{Binary: br.bin, AMI: amiAddr, AMIUser: amiUser, AMISecret: amiSecret,
		LogLevel: br.logLevel, Stderr: stderr})
	if err != nil {
		select {
		case perr := <-pbxDied:
			return perr
		default:
			return err
		}
	}
	err = f(testBridge{http: b.HTTP, admin: b.Admin, token: b.Token, pid: b.PID})
	if serr := b.Stop(); err == nil {
		err = serr
	}
	return err
}
