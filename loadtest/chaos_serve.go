package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serveProc runs `ctibridge serve` as a child process the way systemd
// would (Restart=on-failure): when it exits, it is started again after
// RestartDelay, until the context ends. Its standard error goes to
// serve.log in the work directory, every start appended. Its first run
// listens on ports the kernel picks, as StartBridge's, read back from its
// log; the restarts listen on the same ones (its clients come back to
// them).
type serveProc struct {
	// Immutable after newServeProc.
	bin       string
	logPath   string
	delay     time.Duration
	listening chan struct{} // closed once http and admin are known

	// Set once before listening is closed.
	http  string // REST root, http://127.0.0.1:port
	admin string // admin root

	mu     sync.Mutex // guards the fields below
	args   []string   // the ports the first run took, for the others
	cmd    *exec.Cmd  // the running child, nil between runs
	killed *exec.Cmd  // the child the suite last sent kill -9
	starts int
	exits  []string // how each run ended, other than by the suite's kill -9
}

// newServeProc prepares serve on free loopback ports with a users file
// holding one admin (password "admin", hashed by the binary's own
// `passwd`), a data directory under dir, and ami as its manager address.
func newServeProc(cfg ChaosConfig, dir, ami string, extra ...string) (*serveProc, error) {
	args := []string{"serve", "--ami", ami, "--ami-user", "ctibridge", "--ami-secret", "ctibridge"}
	if cfg.AMIPing > 0 && serveHasFlag(cfg.Binary, "ami-ping") {
		args = append(args, "--ami-ping", cfg.AMIPing.String())
	}
	return newNodeProc(cfg, dir, append(args, extra...)...)
}

// newNodeProc prepares `ctibridge args...` (serve or edge) on loopback
// ports the kernel picks, with the users file, data directory and log
// of newServeProc and cfg.ServeArgs last.
func newNodeProc(cfg ChaosConfig, dir string, args ...string) (*serveProc, error) {
	users, err := writeUsersFile(dir)
	if err != nil {
		return nil, err
	}
	args = append(args, "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--users", users, "--data-dir", filepath.Join(dir, "data"),
		"--access-log-every", "-1", "--log-level", "info")
	args = append(args, cfg.ServeArgs...)
	return &serveProc{bin: cfg.Binary, args: args, logPath: filepath.Join(dir, "serve.log"), delay: cfg.RestartDelay,
		listening: make(chan struct{})}, nil
}

// httpURL is the REST root, http://127.0.0.1:port; adminURL the admin
// listener's. Before the first run listens (or if it never did) they
// are an address nothing answers on.
func (s *serveProc) httpURL() string  { return s.addr(&s.http) }
func (s *serveProc) adminURL() string { return s.addr(&s.admin) }

func (s *serveProc) addr(a *string) string {
	select {
	case <-s.listening:
		return *a
	default:
		return "http://127.0.0.1:0"
	}
}

// listened reads the listeners' addresses from the log serve writes from
// offset on (its "ctibridge serving" line), waiting until it is written,
// the process exits (exited) or 60 s pass; found, they become the
// addresses of every later run.
func (s *serveProc) listened(offset int64, exited <-chan struct{}) {
	deadline := time.After(60 * time.Second)
	for {
		b, _ := os.ReadFile(s.logPath)
		if int64(len(b)) > offset {
			for line := range strings.Lines(string(b[offset:])) {
				if !strings.Contains(line, `msg="ctibridge serving"`) {
					continue
				}
				httpAddr, adminAddr := logField(line, "http"), logField(line, "admin")
				if httpAddr == "" || adminAddr == "" {
					continue
				}
				s.http, s.admin = "http://"+httpAddr, "http://"+adminAddr
				s.mu.Lock()
				for i := 0; i+1 < len(s.args); i++ {
					switch s.args[i] {
					case "--http":
						s.args[i+1] = httpAddr
					case "--admin":
						s.args[i+1] = adminAddr
					}
				}
				s.mu.Unlock()
				close(s.listening)
				return
			}
		}
		select {
		case <-exited:
			return
		case <-deadline:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logField is key's value in a text log line (key=value, unquoted).
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return v
}

// serveHasFlag reports whether `bin serve -h` lists --name, so that the
// suite passes a fix's flag only to a binary that has it.
func serveHasFlag(bin, name string) bool {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	return bytes.Contains(out, []byte("-"+name+" "))
}

// writeUsersFile writes users.yaml with an admin whose password is
// "admin" (adminHash) and a user "flooder" (same password, an admin too,
// so it sees as much as the screens it competes with): the ws
// scenario's attacker is a user of its own, as a real one would be.
func writeUsersFile(dir string) (string, error) {
	hash, err := adminHash()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "users.yaml")
	body := fmt.Sprintf("users:\n  - username: admin\n    password_hash: %q\n    role: admin\n"+
		"  - username: flooder\n    password_hash: %q\n    role: admin\n", hash, hash)
	return path, os.WriteFile(path, []byte(body), 0o600)
}

// run starts serve and restarts it whenever it exits, until ctx ends;
// then it stops the running child with SIGTERM (SIGKILL 10 s later) and
// returns.
func (s *serveProc) run(ctx context.Context) {
	for ctx.Err() == nil {
		logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			s.exit("cannot open its log: " + err.Error())
			return
		}
		offset, _ := logf.Seek(0, io.SeekEnd)
		s.mu.Lock()
		cmd := exec.Command(s.bin, s.args...)
		s.mu.Unlock()
		cmd.Stdout, cmd.Stderr = logf, logf
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			logf.Close()
			s.exit("did not start: " + err.Error())
			return
		}
		s.mu.Lock()
		s.cmd = cmd
		s.starts++
		first := s.starts == 1
		s.mu.Unlock()
		stop := context.AfterFunc(ctx, func() {
			cmd.Process.Signal(syscall.SIGTERM)
			time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		})
		waited := make(chan error, 1)
		exited := make(chan struct{})
		go func() { waited <- cmd.Wait(); close(exited) }()
		if first {
			s.listened(offset, exited)
		}
		err = <-waited
		stop()
		logf.Close()
		s.mu.Lock()
		s.cmd = nil
		killed := s.killed == cmd
		s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if !killed {
			s.exit(fmt.Sprintf("%v: %s", err, lastLine(s.logTail())))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.delay):
		}
	}
}

func (s *serveProc) exit(how string) {
	s.mu.Lock()
	s.exits = append(s.exits, how)
	s.mu.Unlock()
}

// kill9 sends SIGKILL to the running child; false when none runs.
func (s *serveProc) kill9() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return false
	}
	if s.cmd.Process.Kill() != nil {
		return false
	}
	s.killed = s.cmd
	return true
}

// pid is the running child's process id, 0 when none runs.
func (s *serveProc) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// stats returns how many times serve was started and how its runs ended
// (other than by the suite's kill -9).
func (s *serveProc) stats() (starts int, exits []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, append([]string(nil), s.exits...)
}

// rss is the running child's resident set size in bytes (0 when none).
func (s *serveProc) rss() uint64 {
	pid := s.pid()
	if pid == 0 {
		return 0
	}
	return procStatusBytes(strconv.Itoa(pid), "VmRSS:")
}

// procStatusBytes is a size field of /proc/PID/status (VmRSS:, VmHWM:,
// ...; PID "self" for this process) in bytes, 0 when unknown.
func procStatusBytes(pid, field string) uint64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ready reports whether /readyz answers 200.
func (s *serveProc) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.adminURL()+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == 200
}

// waitReady polls /readyz until it answers 200, for at most d.
func (s *serveProc) waitReady(ctx context.Context, d time.Duration) (time.Duration, error) {
	start := time.Now()
	select {
	case <-s.listening:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
		return time.Since(start), fmt.Errorf("serve not listening after %v; its log: %s", d, s.logTail())
	}
	for {
		if s.ready(ctx) {
			return time.Since(start), nil
		}
		if time.Since(start) > d {
			return time.Since(start), fmt.Errorf("serve not ready (/readyz) after %v; its log: %s", d, s.logTail())
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// login logs in as the users file's admin.
func (s *serveProc) login(ctx context.Context) (string, error) {
	return Login(ctx, s.httpURL(), "admin", "admin", false)
}

// loginFlooder logs in as the ws scenario's attacker.
func (s *serveProc) loginFlooder(ctx context.Context) (string, error) {
	return Login(ctx, s.httpURL(), "flooder", "admin", false)
}

// crashes counts the Go runtime's crash reports in serve's log: panics,
// fatal errors and data races (a -race build).
func (s *serveProc) crashes() (int, string) {
	b, _ := os.ReadFile(s.logPath)
	n, first := 0, ""
	for _, marker := range []string{"panic: ", "fatal error: ", "WARNING: DATA RACE"} {
		for i := 0; ; {
			j := bytes.Index(b[i:], []byte(marker))
			if j < 0 {
				break
			}
			if first == "" {
				line, _, _ := bytes.Cut(b[i+j:], []byte("\n"))
				first = string(line)
			}
			n++
			i += j + len(marker)
		}
	}
	return n, first
}

// lastLine is the last line of s.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// logTail is the end of serve's log, for error messages.
func (s *serveProc) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}
