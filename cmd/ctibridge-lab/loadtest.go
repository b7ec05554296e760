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

const loadtestUsage = `Usage:
  ctibridge-lab loadtest http URL [flags]   HTTP/1.1 load (closed loop, or open loop with -R)
  ctibridge-lab loadtest ws URL [flags]     WebSocket clients subscribed to the live state
  ctibridge-lab loadtest e2e [flags]        SIP calls through pbxsim, timed until they show on WebSocket clients
  ctibridge-lab loadtest chaos [flags]      the fault suite: AMI faults, DB outage and kill -9, WebSocket flood
  ctibridge-lab loadtest failover [flags]   scale-out: the leading bridge killed (SIGKILL) again and again, takeover times, ghosts, CDRs, resumes
  ctibridge-lab loadtest synth [flags]      a synthetic AMI with thousands of extensions and calls up, the bridge's engine measured

Common flags: --json, --html FILE, --profile DIR (with --admin URL), --max-p99 DUR, ...
Run 'ctibridge-lab loadtest MODE -h' for a mode's flags. See docs/loadtest.md.
`

// listFlag is a repeatable string flag (-H).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// commonFlags are the output, profile and target flags of every mode.
type commonFlags struct {
	json, quiet  bool
	html         string
	profile      string
	admin        string
	grace        time.Duration
	maxP50       time.Duration
	maxP99       time.Duration
	maxP999      time.Duration
	minRate      float64
	maxErrors    int64
	maxNon2xx    int64
	progress     bool
	loginUser    string
	token        string
	insecure     bool
	counterLimit map[string]*int64
}

func (c *commonFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&c.json, "json", false, "print the report as JSON (the shape in docs/loadtest.md) instead of the table")
	fs.StringVar(&c.html, "html", "", "also write a self-contained HTML report to this file")
	fs.StringVar(&c.profile, "profile", "", "capture CPU, heap, mutex and block profiles of the target (from --admin's /debug/pprof) into this directory")
	fs.StringVar(&c.admin, "admin", "", "the target's admin listener, for --profile (http://127.0.0.1:9090)")
	fs.DurationVar(&c.grace, "grace", 5*time.Second, "how long the run may overrun its duration to finish")
	fs.DurationVar(&c.maxP50, "max-p50", 0, "fail (exit 1) when the p50 latency is above this")
	fs.DurationVar(&c.maxP99, "max-p99", 0, "fail when the p99 latency is above this")
	fs.DurationVar(&c.maxP999, "max-p999", 0, "fail when the p99.9 latency is above this")
	fs.Float64Var(&c.minRate, "min-rate", 0, "fail when fewer requests (messages, calls) per second were done")
	fs.Int64Var(&c.maxErrors, "max-errors", -1, "fail when there were more errors (-1: no limit)")
	fs.Int64Var(&c.maxNon2xx, "max-non2xx", -1, "fail when there were more non-2xx responses (-1: no limit)")
	fs.BoolVar(&c.progress, "progress", false, "print one line a second to stderr while running")
	fs.StringVar(&c.loginUser, "login", "", "USER:PASSWORD to log in with (POST /auth/login) for a token")
	fs.StringVar(&c.token, "token", getenv("CTIBRIDGE_LOADTEST_TOKEN"), "bearer token (env CTIBRIDGE_LOADTEST_TOKEN)")
	fs.BoolVar(&c.insecure, "insecure", false, "do not verify TLS certificates")
}

// screenLimits registers --max-missing and --max-ghosts, the limits of
// the runs that watch calls on screens (e2e, synth).
func (c *commonFlags) screenLimits(fs *flag.FlagSet) {
	maxMissing := fs.Int64("max-missing", 0, "fail when more answered calls never showed on a screen (-1: no limit)")
	maxGhosts := fs.Int64("max-ghosts", 0, "fail when more extensions still show a call 12 s after the run, with no PBX call (-1: no limit)")
	c.counterLimit = map[string]*int64{"calls_missing": maxMissing, "ghost_calls_stuck": maxGhosts, "ghost_calls_rest_stuck": maxGhosts}
}

func (c *commonFlags) targets() loadtest.Targets {
	t := loadtest.Targets{MaxP50: c.maxP50, MaxP99: c.maxP99, MaxP999: c.maxP999, MinRPS: c.minRate,
		MaxErrors: c.maxErrors, MaxNon2xx: c.maxNon2xx}
	for k, v := range c.counterLimit {
		if *v >= 0 {
			if t.MaxCounter == nil {
				t.MaxCounter = map[string]uint64{}
			}
			t.MaxCounter[k] = uint64(*v)
		}
	}
	return t
}

// parseNoArgs parses the flags of a mode that takes no argument
// ("ctibridge-lab loadtest NAME [flags]").
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ctibridge-lab loadtest %s [flags]\n", fs.Name())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("loadtest %s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// parseWithURL parses flags that may come before or after one URL.
func parseWithURL(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("loadtest %s: want one URL, got %d arguments", fs.Name(), len(pos))
	}
	return pos[0], nil
}

// runLoadtest is `ctibridge-lab loadtest http|ws|e2e|chaos|failover|synth ...`.
func runLoadtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, loadtestUsage)
		return errors.New("loadtest: no mode given")
	}
	switch args[0] {
	case "http":
		return loadtestHTTP(ctx, args[1:], getenv, stdout, stderr)
	case "ws":
		return loadtestWS(ctx, args[1:], getenv, stdout, stderr)
	case "e2e":
		return loadtestE2E(ctx, args[1:], getenv, stdout, stderr)
	case "e2e-bridge": // the child of e2e (loadtest_e2e_bridge.go)
		return loadtestE2EBridge(ctx, args[1:], stdout, stderr)
	case "chaos":
		return loadtestChaos(ctx, args[1:], getenv, stdout, stderr)
	case "failover":
		return loadtestFailover(ctx, args[1:], getenv, stdout, stderr)
	case "synth":
		return loadtestSynth(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, loadtestUsage)
		return nil
	}
	fmt.Fprint(stderr, loadtestUsage)
	return fmt.Errorf("loadtest: unknown mode %q", args[0])
}

// login turns --login into a token for base (the REST root).
func (c *commonFlags) login(ctx context.Context, base string) error {
	if c.loginUser == "" || c.token != "" {
		return nil
	}
	user, pass, ok := strings.Cut(c.loginUser, ":")
	if !ok {
		return errors.New("loadtest: --login wants USER:PASSWORD")
	}
	tok, err := loadtest.Login(ctx, base, user, pass, c.insecure)
	if err != nil {
		return err
	}
	c.token = tok
	return nil
}

// finish prints the report (table or JSON), writes the HTML file and
// checks the targets: a missed target is the error that makes the exit
// code non-zero.
func (c *commonFlags) finish(rep *loadtest.Report, prof *loadtest.ProfileResult, stdout, stderr io.Writer) error {
	if c.json {
		stdout.Write(rep.JSON())
	} else {
		fmt.Fprintf(stdout, "\n")
		rep.WriteText(stdout)
	}
	if prof != nil {
		for _, f := range prof.Files {
			fmt.Fprintf(stderr, "profile: %s\n", f)
		}
		for _, e := range prof.Errors {
			fmt.Fprintf(stderr, "profile: %s\n", e)
		}
	}
	if c.html != "" {
		if err := os.WriteFile(c.html, rep.HTML(), 0o644); err != nil {
			return fmt.Errorf("loadtest: --html: %w", err)
		}
		fmt.Fprintf(stderr, "report: %s\n", c.html)
	}
	if miss := c.targets().Check(rep); len(miss) > 0 {
		return fmt.Errorf("loadtest: targets missed: %s", strings.Join(miss, "; "))
	}
	return nil
}

// startProfile begins capturing the target's profiles for d when --profile
// is set; wait returns what was written.
func (c *commonFlags) startProfile(ctx context.Context, d time.Duration) (wait func() *loadtest.ProfileResult, err error) {
	if c.profile == "" {
		return func() *loadtest.ProfileResult { return nil }, nil
	}
	if c.admin == "" {
		return nil, errors.New("loadtest: --profile needs --admin, the target's admin address (http://127.0.0.1:9090)")
	}
	admin := c.admin
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	done := make(chan *loadtest.ProfileResult, 1)
	go func() { done <- loadtest.Profile(ctx, admin, c.profile, d) }()
	return func() *loadtest.ProfileResult { return <-done }, nil
}

func (c *commonFlags) progressFunc(stderr io.Writer, unit string) func(loadtest.Second) {
	if !c.progress {
		return nil
	}
	return func(s loadtest.Second) {
		fmt.Fprintf(stderr, "%6.1fs %8d %s  p50 %v  p99 %v  max %v\n", s.At.Seconds(), s.Requests, unit,
			s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), s.Max.Round(time.Microsecond))
	}
}

func loadtestHTTP(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c commonFlags
	c.register(fs, getenv)
	var cfg loadtest.HTTPConfig
	var headers listFlag
	var body string
	fs.IntVar(&cfg.Connections, "c", 10, "connections")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "duration (ignored when -n is set and -d is not)")
	fs.Int64Var(&cfg.Requests, "n", 0, "stop after this many requests")
	fs.IntVar(&cfg.Pipelining, "p", 1, "pipelining depth: requests written before reading the responses")
	fs.Float64Var(&cfg.Rate, "R", 0, "open loop: requests per second in total, latency timed from when each was due")
	fs.StringVar(&cfg.Method, "m", "", "method (default GET, or POST with -b)")
	fs.StringVar(&body, "b", "", "request body, or @FILE")
	fs.Var(&headers, "H", "header \"Name: value\" (repeatable)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-response timeout")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ctibridge-lab loadtest http URL [flags]\n")
		fs.PrintDefaults()
	}
	url, err := parseWithURL(fs, args)
	if err != nil {
		return err
	}
	durSet := false
	fs.Visit(func(f *flag.Flag) { durSet = durSet || f.Name == "d" })
	if cfg.Requests > 0 && !durSet {
		cfg.Duration = 0
	}
	if strings.HasPrefix(body, "@") {
		b, err := os.ReadFile(body[1:])
		if err != nil {
			return fmt.Errorf("loadtest: -b: %w", err)
		}
		cfg.Body = b
	} else if body != "" {
		cfg.Body = []byte(body)
	}
	cfg.URL, cfg.Headers, cfg.Insecure, cfg.Grace = url, headers, c.insecure, c.grace
	if err := c.login(ctx, loadtest.RootOf(url)); err != nil {
		return err
	}
	cfg.Token = c.token
	cfg.Progress = c.progressFunc(stderr, "req")
	wait, err := c.startProfile(ctx, cfg.Duration)
	if err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(stdout, "Running %v test @ %s\n%d connections, pipelining %d", cfg.Duration, url, cfg.Connections, cfg.Pipelining)
		if cfg.Rate > 0 {
			fmt.Fprintf(stdout, ", open loop at %.0f requests/s", cfg.Rate)
		}
		fmt.Fprintln(stdout)
	}
	rep, err := loadtest.RunHTTP(ctx, cfg)
	if err != nil {
		return err
	}
	return c.finish(rep, wait(), stdout, stderr)
}

func loadtestWS(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ws", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c commonFlags
	c.register(fs, getenv)
	var cfg loadtest.WSConfig
	var topics string
	fs.IntVar(&cfg.Clients, "c", 100, "WebSocket clients")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "duration")
	fs.Float64Var(&cfg.RampUp, "ramp", 0, "clients connecting per second (0: all at once, 64 handshakes at a time)")
	fs.StringVar(&topics, "topics", "extensions", "comma-separated topics to subscribe to")
	maxDropped := fs.Int64("max-dropped", -1, "fail when more clients were dropped (-1: no limit)")
	fs.BoolVar(&cfg.Epoll, "epoll", false, "read the clients with epoll readers, a few goroutines for all (Linux, ws://; else gorilla's client, a goroutine each), as e2e's screens: thousands of clients leave the CPU to the server")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ctibridge-lab loadtest ws ws://HOST:PORT/ws [flags]\n")
		fs.PrintDefaults()
	}
	url, err := parseWithURL(fs, args)
	if err != nil {
		return err
	}
	c.counterLimit = map[string]*int64{"clients_dropped": maxDropped}
	cfg.URL, cfg.Topics, cfg.Insecure, cfg.Grace = url, splitList(topics), c.insecure, c.grace
	if err := c.login(ctx, loadtest.RootOf(url)); err != nil {
		return err
	}
	cfg.Token = c.token
	cfg.Progress = c.progressFunc(stderr, "msg")
	wait, err := c.startProfile(ctx, cfg.Duration)
	if err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(stdout, "Running %v test @ %s\n%d clients, subscribed to %v\n", cfg.Duration, url, cfg.Clients, cfg.Topics)
	}
	rep, err := loadtest.RunWS(ctx, cfg)
	if err != nil {
		return err
	}
	return c.finish(rep, wait(), stdout, stderr)
}

// suiteFlags are the flags of the runs that start ctibridge as child
// processes (chaos, failover).
type suiteFlags struct {
	bin, dir, logLevel string
	serveArgs          listFlag
	keep, json, strict bool
}

// register adds --bin, --serve-arg, --dir, --keep, --json, --strict
// (strictUsage) and --log-level; runs names the children.
func (s *suiteFlags) register(fs *flag.FlagSet, runs, strictUsage string) {
	fs.StringVar(&s.bin, "bin", "", binHelp+", run as "+runs)
	fs.Var(&s.serveArgs, "serve-arg", "extra argument for every "+runs+" (repeatable: --serve-arg=--ws-slow-timeout --serve-arg=5s)")
	fs.StringVar(&s.dir, "dir", "", "work directory (the logs and data of "+runs+"); default a temporary one, removed unless --keep")
	fs.BoolVar(&s.keep, "keep", false, "keep the work directory")
	fs.BoolVar(&s.json, "json", false, "print the report as JSON")
	fs.BoolVar(&s.strict, "strict", false, strictUsage)
	fs.StringVar(&s.logLevel, "log-level", "warn", "log level of the run's progress")
}

// setup finds the ctibridge binary (bridgeBinary) and makes the
// progress logger.
func (s *suiteFlags) setup(ctx context.Context, mode string, getenv func(string) string, stderr io.Writer) (*slog.Logger, error) {
	bin, err := bridgeBinary(ctx, s.bin, getenv, stderr)
	if err != nil {
		return nil, fmt.Errorf("loadtest %s: %w", mode, err)
	}
	s.bin = bin
	return newLogger(stderr, s.logLevel)
}

// print writes the report as JSON or text.
func (s *suiteFlags) print(stdout io.Writer, rep interface {
	JSON() []byte
	WriteText(io.Writer)
}) {
	if s.json {
		stdout.Write(rep.JSON())
	} else {
		rep.WriteText(stdout)
	}
}
