package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// BridgeConfig is a `ctibridge serve` that StartBridge runs as a child
// process: serve's defaults, on loopback, following the manager at AMI.
type BridgeConfig struct {
	Binary             string // the ctibridge binary
	AMI                string // the manager's address, host:port
	AMIUser, AMISecret string
	LogLevel           string        // serve's --log-level (default error)
	Args               []string      // more serve arguments, last
	Stderr             io.Writer     // serve's log at LogLevel and above, JSON lines, from a goroutine (default: discarded)
	StartTimeout       time.Duration // until it is ready (default 60 s)
}

// Bridge is a running `ctibridge serve` child process, ready (its
// /readyz answered 200) and logged in as its one admin.
type Bridge struct {
	HTTP  string // REST root, http://127.0.0.1:port
	Admin string // admin root, for /metrics and /debug/pprof
	Token string // the admin's token
	PID   int

	cmd  *exec.Cmd
	dir  string        // its temporary users file and data directory
	done chan struct{} // closed when it has exited
	err  error         // how it exited, once done is closed

	stopOnce sync.Once
	mu       sync.Mutex // guards last
	last     string     // the last line of its log shown, for errors
}

// StartBridge starts cfg.Binary serve on loopback ports the kernel picks
// (read back from its log) with a users file holding one admin (user
// and password "admin"), a temporary data directory, no access log and
// no CDR recording (the lab measures the live state), waits until it is
// ready (cfg.StartTimeout, default 60 s), then logs in. Stop ends it.
func StartBridge(ctx context.Context, cfg BridgeConfig) (*Bridge, error) {
	if cfg.Binary == "" {
		return nil, errors.New("loadtest: bridge: no ctibridge binary")
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	dir, err := os.MkdirTemp("", "ctibridge-lab-")
	if err != nil {
		return nil, err
	}
	b := &Bridge{dir: dir, done: make(chan struct{})}
	if err := b.start(cfg); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := b.ready(ctx, cfg.StartTimeout); err != nil {
		b.Stop()
		return nil, err
	}
	if b.Token, err = Login(ctx, b.HTTP, "admin", "admin", false); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *Bridge) start(cfg BridgeConfig) error {
	hash, err := adminHash()
	if err != nil {
		return err
	}
	users := filepath.Join(b.dir, "users.yaml")
	if err := os.WriteFile(users, fmt.Appendf(nil, "users:\n  - username: admin\n    password_hash: %q\n    role: admin\n", hash), 0o600); err != nil {
		return err
	}
	// Ports chosen by the kernel, read back from serve's "ctibridge
	// serving" line: a port picked free beforehand may be taken by then.
	args := []string{"serve", "--ami", cfg.AMI, "--ami-user", cfg.AMIUser, "--ami-secret", cfg.AMISecret,
		"--http", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--users", users, "--data-dir", filepath.Join(b.dir, "data"),
		"--access-log-every", "-1", "--record-cdr=false", "--log-format", "json", "--log-level", "info"}
	b.cmd = exec.Command(cfg.Binary, append(args, cfg.Args...)...)
	pipe, err := b.cmd.StderrPipe()
	if err != nil {
		return err
	}
	dieWithParent(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("loadtest: start the bridge (%s): %w", cfg.Binary, err)
	}
	b.PID = b.cmd.Process.Pid
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelError
	}
	addrs := make(chan [2]string, 1)
	go func() {
		b.readLog(pipe, level, cfg.Stderr, addrs)
		b.err = b.cmd.Wait() // after the last read of its pipe
		close(b.done)
	}()
	select {
	case a := <-addrs:
		b.HTTP, b.Admin = "http://"+a[0], "http://"+a[1]
		return nil
	case <-b.done:
		return fmt.Errorf("loadtest: the bridge exited before it listened: %v: %s", b.err, b.lastLine())
	case <-time.After(cfg.StartTimeout):
		b.cmd.Process.Kill()
		<-b.done
		return fmt.Errorf("loadtest: the bridge did not listen in %v: %s", cfg.StartTimeout, b.lastLine())
	}
}

// readLog reads serve's JSON log until it ends: the listeners' addresses
// go to addrs, the lines at level or above (and any that is not JSON, a
// panic's) to w, the last one kept for the errors.
func (b *Bridge) readLog(r io.Reader, level slog.Level, w io.Writer, addrs chan<- [2]string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Level slog.Level
			Msg   string
		}
		isJSON := json.Unmarshal(line, &rec) == nil
		var at struct{ HTTP, Admin string }
		if isJSON && rec.Msg == "ctibridge serving" && json.Unmarshal(line, &at) == nil && at.HTTP != "" && at.Admin != "" {
			select {
			case addrs <- [2]string{at.HTTP, at.Admin}:
			default:
			}
		}
		if !isJSON || rec.Level >= level {
			b.mu.Lock()
			b.last = string(line)
			b.mu.Unlock()
			if w != nil {
				w.Write(append(line, '\n'))
			}
		}
	}
}

func (b *Bridge) lastLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == "" {
		return "(nothing logged)"
	}
	return b.last
}

// ready waits until the bridge's /readyz answers 200 (its link up and
// resynchronised), it exits, ctx ends or timeout passes.
func (b *Bridge) ready(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		res, err := client.Get(b.Admin + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadtest: the bridge (pid %d) was not ready (/readyz) in %v", b.PID, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.done:
			return fmt.Errorf("loadtest: the bridge exited before it was ready: %v: %s", b.err, b.lastLine())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exited is closed when the bridge process has exited.
func (b *Bridge) Exited() <-chan struct{} { return b.done }

// Stop ends the bridge (SIGTERM, SIGKILL after 15 s) and removes its
// directory. It returns how it exited when that was not the stop asked
// for (nil for a clean stop); it may be called again.
func (b *Bridge) Stop() error {
	var err error
	b.stopOnce.Do(func() {
		select {
		case <-b.done:
			err = fmt.Errorf("loadtest: the bridge exited by itself: %v", b.err)
		default:
			b.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-b.done:
				if b.err != nil {
					err = fmt.Errorf("loadtest: the bridge: %v", b.err)
				}
			case <-time.After(15 * time.Second):
				b.cmd.Process.Kill()
				<-b.done
				err = errors.New("loadtest: the bridge did not stop in 15 s: killed")
			}
		}
		os.RemoveAll(b.dir)
	})
	return err
}

// adminHash is the bcrypt hash of the lab's password "admin" at bcrypt's
// least cost: `ctibridge passwd`'s (cost 10) takes seconds in a race
// build on a busy machine, as would each login.
func adminHash() (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte("admin"), bcrypt.MinCost)
	return string(h), err
}
