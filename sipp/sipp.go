// Package sipp runs the SIPp traffic generator with the scenarios of this
// directory against pbxsim or a real Asterisk, and reads its statistics.
//
// It only builds the command line, starts the sipp binary (again, on
// other ports, when sipp could not bind the ones Run chose), and parses
// the statistics file (-trace_stat -stf) and exit code into call counts,
// a fatal exit into an error quoting sipp's complaint. It knows nothing
// of AMI or of pbxsim. Run may be called from several
// goroutines at once; each call owns its sipp process and waits for it.
package sipp

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options is one sipp invocation. The zero value of a field leaves sipp's
// own default, except where noted.
type Options struct {
	// Binary is the sipp executable. Default: "sipp" from PATH.
	Binary string
	// Scenario is the scenario XML (-sf): a path, or the name of a file of
	// this package's directory ("uas.xml"), see ScenarioPath. Required.
	Scenario string
	// Remote is the target host:port; empty for a UAS.
	Remote string
	// LocalIP (-i). Default 127.0.0.1.
	LocalIP string
	// LocalPort (-p). Default: a free UDP port chosen by Run.
	LocalPort int
	// MediaPort (-mp). Default: LocalPort+10000 capped at 65000 (sipp's
	// default 6000 collides when several instances run).
	MediaPort int
	// Transport (-t): u1 (UDP, one socket, the default), un, t1, tn.
	Transport string
	// Service (-s): the number to call, or a UAS's user.
	Service string
	// InjectionFile (-inf): CSV whose fields fill [fieldN].
	InjectionFile string
	// Calls (-m): stop after this many calls. Default 0: no limit.
	Calls int
	// Rate (-r) calls per RatePeriod (-rp, default 1 s). Limit (-l) caps
	// simultaneous calls.
	Rate       float64
	RatePeriod time.Duration
	Limit      int
	// Duration (-d): the length of a <pause/> without its own duration.
	Duration time.Duration
	// Set holds global variables (-set name value), e.g. ringtime and
	// holdtime for uas.xml.
	Set map[string]string
	// Timeout (-timeout, with -timeout_error): a global limit after which
	// sipp stops and exits with an error. Default 0: none.
	Timeout time.Duration
	// Dir receives sipp's statistics and error logs. Default: a temporary
	// directory removed after the run.
	Dir string
	// TraceMessages adds -trace_msg (every SIP message, to Dir).
	TraceMessages bool
	// Extra arguments appended as they are.
	Extra []string
	// Output receives sipp's standard output and error. Default: discarded.
	Output io.Writer
}

// Result is what one sipp run did, from its final statistics line.
type Result struct {
	Args       []string // the command line, binary first
	ExitCode   int      // 0 all calls succeeded, 1 some failed, 97/99 see sipp(1)
	Created    int      // TotalCallCreated
	Successful int      // SuccessfulCall(C)
	Failed     int      // FailedCall(C)
	Retrans    int      // Retransmissions(C)
	Elapsed    time.Duration
	Errors     string // the first lines of sipp's error log, if any
}

// FailureRatio is Failed/Created (0 when nothing was created).
func (r Result) FailureRatio() float64 {
	if r.Created == 0 {
		return 0
	}
	return float64(r.Failed) / float64(r.Created)
}

// ErrNotFound means the sipp binary is not installed.
var ErrNotFound = errors.New("sipp: binary not found (Debian: apt-get install sip-tester)")

// LookPath finds the sipp binary.
func LookPath(bin string) (string, error) {
	if bin == "" {
		bin = "sipp"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return p, nil
}

// Dir is the directory holding the scenario files of this package (the
// source directory: the files are not embedded so that sipp can read them
// and people can edit them).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// ScenarioPath resolves a bare scenario or CSV name against Dir.
func ScenarioPath(name string) string {
	if name == "" || filepath.IsAbs(name) || strings.ContainsRune(name, os.PathSeparator) {
		return name
	}
	return filepath.Join(Dir(), name)
}

// Args builds sipp's argument list (without the binary) for o, whose
// LocalPort must be set. statFile is where -stf writes.
func Args(o Options, statFile string) []string {
	var a []string
	if o.Remote != "" {
		a = append(a, o.Remote)
	}
	ip := o.LocalIP
	if ip == "" {
		ip = "127.0.0.1"
	}
	a = append(a, "-sf", ScenarioPath(o.Scenario), "-i", ip, "-p", strconv.Itoa(o.LocalPort))
	mp := o.MediaPort
	if mp == 0 {
		mp = min(o.LocalPort+10000, 65000)
	}
	a = append(a, "-mp", strconv.Itoa(mp))
	if o.Transport != "" {
		a = append(a, "-t", o.Transport)
	}
	if o.Service != "" {
		a = append(a, "-s", o.Service)
	}
	if o.InjectionFile != "" {
		a = append(a, "-inf", ScenarioPath(o.InjectionFile))
	}
	if o.Calls > 0 {
		a = append(a, "-m", strconv.Itoa(o.Calls))
	}
	if o.Rate > 0 {
		a = append(a, "-r", strconv.FormatFloat(o.Rate, 'f', -1, 64))
		if o.RatePeriod > 0 {
			a = append(a, "-rp", strconv.FormatInt(o.RatePeriod.Milliseconds(), 10))
		}
	}
	if o.Limit > 0 {
		a = append(a, "-l", strconv.Itoa(o.Limit))
	}
	if o.Duration > 0 {
		a = append(a, "-d", strconv.FormatInt(o.Duration.Milliseconds(), 10))
	}
	keys := make([]string, 0, len(o.Set))
	for k := range o.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a = append(a, "-set", k, o.Set[k])
	}
	if o.Timeout > 0 {
		a = append(a, "-timeout", strconv.FormatInt(int64(o.Timeout/time.Second)+1, 10)+"s", "-timeout_error")
	}
	a = append(a, "-nostdin", "-trace_err", "-trace_stat", "-stf", statFile, "-fd", "1")
	if o.TraceMessages {
		a = append(a, "-trace_msg")
	}
	return append(a, o.Extra...)
}

// Run runs sipp until it exits or ctx ends (then it is interrupted, as
// with Ctrl-C, and still reports its statistics). It returns an error when
// sipp could not run or ended with a fatal error; calls that failed are
// counted in the Result, not returned as an error.
func Run(ctx context.Context, o Options) (Result, error) {
	bin, err := LookPath(o.Binary)
	if err != nil {
		return Result{}, err
	}
	if o.Scenario == "" {
		return Result{}, errors.New("sipp: no scenario")
	}
	dir := o.Dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "sipp-")
		if err != nil {
			return Result{}, fmt.Errorf("sipp: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	// Ports Run chooses may be taken between the check and sipp's bind
	// (other programs on the machine): sipp then exits 254 before placing
	// a call, and Run tries other ports.
	auto := o.LocalPort == 0
	for attempt := 1; ; attempt++ {
		if auto {
			if o.LocalPort, err = freePort(); err != nil {
				return Result{}, err
			}
		}
		res, err := runOnce(ctx, bin, o, dir)
		if auto && res.ExitCode == exitBind && res.Created == 0 && attempt < 4 && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// exitBind is sipp's exit code when it cannot bind a socket (-2).
const exitBind = 254

// freePort is FreePort, replaced by tests.
var freePort = FreePort

// runOnce is one sipp run of Run, o's LocalPort set.
func runOnce(ctx context.Context, bin string, o Options, dir string) (Result, error) {
	stat := filepath.Join(dir, "stat.csv")
	os.Remove(stat) // a previous attempt's
	args := Args(o, stat)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	// The end of what sipp writes to stderr says why it gave up.
	tail := &tailWriter{max: 2048}
	cmd.Stderr = tail
	if o.Output != nil {
		cmd.Stdout, cmd.Stderr = o.Output, io.MultiWriter(o.Output, tail)
	}
	start := time.Now()
	runErr := cmd.Run()
	res := Result{Args: append([]string{bin}, args...), ExitCode: cmd.ProcessState.ExitCode(), Elapsed: time.Since(start)}
	if err := parseStat(stat, &res); err != nil && runErr == nil {
		runErr = err
	}
	errLog := &tailWriter{max: 2048}
	if logs, _ := filepath.Glob(filepath.Join(dir, "*_errors.log")); len(logs) > 0 {
		if b, err := os.ReadFile(logs[0]); err == nil {
			res.Errors = string(b[:min(len(b), 2000)])
			errLog.Write(b)
		}
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		switch res.ExitCode {
		case 0, 1, 97, 99:
			runErr = nil
		}
		if ctx.Err() != nil {
			runErr = nil // interrupted on purpose
		}
	}
	if runErr != nil {
		last := tail.lastLine()
		if strings.HasPrefix(last, "There were more errors") {
			last = errLog.lastLine() // the last of them, where sipp gave up
		}
		if last != "" {
			return res, fmt.Errorf("sipp: %s: %w: %s", filepath.Base(o.Scenario), runErr, last)
		}
		return res, fmt.Errorf("sipp: %s: %w", filepath.Base(o.Scenario), runErr)
	}
	return res, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// lastLine is the last of sipp's stamped lines written, without its
// stamp ("2026-12-01\t21:52:56.658912\t1796161976.658912: Unable to bind
// ..."; a message sipp quotes spans lines of its own), else the last
// non-empty line.
func (t *tailWriter) lastLine() string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	for k := len(lines) - 1; k >= 0; k-- {
		l := strings.TrimSpace(lines[k])
		if i := strings.Index(l, ": "); i >= 0 && strings.Count(l[:i], "\t") == 2 {
			return l[i+2:]
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// parseStat reads the last line of a -trace_stat file.
func parseStat(path string, res *Result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("statistics: %w", err)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.Comma = ';'
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) < 2 {
		return fmt.Errorf("statistics: unreadable %s", path)
	}
	head, last := recs[0], recs[len(recs)-1]
	get := func(name string) int {
		i := slices.Index(head, name)
		if i < 0 || i >= len(last) {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimSpace(last[i]))
		return n
	}
	res.Created = get("TotalCallCreated")
	res.Successful = get("SuccessfulCall(C)")
	res.Failed = get("FailedCall(C)")
	res.Retrans = get("Retransmissions(C)")
	return nil
}
