package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// BridgeConfig is a `ctibridge serve` that StartBridge runs as a child
// process: serve's defaults, on loopback, following the manager at AMI.
type BridgeConfig struct {
	Binary             string // the ctibridge binary
	AMI                string // the manager's address, host:port
	AMIUser, AMISecret string
	LogLevel           string        // serve's --log-level (default error)
	Args               []string      // more serve arguments, last
	Stderr             io.Writer     // serve's standard error (default: discarded)
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
}

// StartBridge starts cfg.Binary serve with a users file holding one admin
// (user and password "admin"), a temporary data directory, no access log
// and no CDR recording (the lab measures the live state), waits until it is ready
// (cfg.StartTimeout, default 60 s), then logs in. Stop ends it.
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
	httpAddr, err := freeTCPAddr()
	if err != nil {
		return err
	}
	adminAddr, err := freeTCPAddr()
	if err != nil {
		return err
	}
	users, err := writeUsersFile(cfg.Binary, b.dir)
	if err != nil {
		return err
	}
	args := []string{"serve", "--ami", cfg.AMI, "--ami-user", cfg.AMIUser, "--ami-secret", cfg.AMISecret,
		"--http", httpAddr, "--admin", adminAddr, "--users", users, "--data-dir", filepath.Join(b.dir, "data"),
		"--access-log-every", "-1", "--record-cdr=false", "--log-level", cfg.LogLevel}
	b.cmd = exec.Command(cfg.Binary, append(args, cfg.Args...)...)
	b.cmd.Stderr = cfg.Stderr
	dieWithParent(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("loadtest: start the bridge (%s): %w", cfg.Binary, err)
	}
	b.PID = b.cmd.Process.Pid
	b.HTTP, b.Admin = "http://"+httpAddr, "http://"+adminAddr
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	return nil
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
			return fmt.Errorf("loadtest: the bridge exited before it was ready: %v", b.err)
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
