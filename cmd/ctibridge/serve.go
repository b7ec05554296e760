package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctibridge/ctibridge/admin"
	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// serveConfig is everything `ctibridge serve` reads from flags, env and file.
type serveConfig struct {
	ami, amiUser, amiSecret string
	amiTLS, amiMD5          bool
	admin                   string
	dataDir                 string
	recordAMI               string
	recordMax               int64
	trunks                  string
	reconcile               time.Duration
	logFormat, logLevel     string
}

func serveSettings(c *serveConfig) *settings {
	s := &settings{}
	s.str(&c.ami, "ami", "127.0.0.1:5038", "Asterisk manager address host:port")
	s.str(&c.amiUser, "ami-user", "", "manager user name (required)")
	s.str(&c.amiSecret, "ami-secret", "", "manager secret (required; prefer the env var or the file to a flag)")
	s.boolean(&c.amiTLS, "ami-tls", false, "connect to the manager over TLS (Asterisk tlsenable)")
	s.boolean(&c.amiMD5, "ami-md5", false, "log in with the MD5 challenge instead of sending the secret")
	s.str(&c.admin, "admin", "127.0.0.1:9090", "listener for /healthz, /readyz, /metrics, /debug/pprof")
	s.str(&c.dataDir, "data-dir", "./ctibridge-data", "spool, recordings and embedded database directory")
	s.str(&c.recordAMI, "record-ami", "", "directory to write the raw AMI stream to (secrets scrubbed), for replay")
	s.integer(&c.recordMax, "record-max-bytes", 100<<20, "size at which an AMI recording file is rotated")
	s.str(&c.trunks, "trunks", "", "comma-separated endpoint names that are trunks (default: any non-numeric endpoint)")
	s.dur(&c.reconcile, "reconcile-every", time.Minute, "period of the drift check against CoreShowChannels (0 disables)")
	s.str(&c.logFormat, "log-format", "text", "log format: text or json")
	s.str(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return s
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// serve runs the bridge until ctx is done, then shuts down in order:
// admin listener, link (engine), AMI client (which logs off).
func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var c serveConfig
	if err := serveSettings(&c).parse("serve", args, getenv, stderr); err != nil {
		return err
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	if c.amiUser == "" || c.amiSecret == "" {
		return errors.New("serve: --ami-user and --ami-secret (or CTIBRIDGE_AMI_USER, CTIBRIDGE_AMI_SECRET) are required")
	}

	acfg := ami.Config{
		Addr:     c.ami,
		Username: c.amiUser,
		Secret:   c.amiSecret,
		MD5:      c.amiMD5,
		Log:      log.With("component", "ami"),
	}
	if c.amiTLS {
		host, _, _ := net.SplitHostPort(c.ami)
		acfg.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if c.recordAMI != "" {
		rec, err := ami.NewRotatingRecorder(c.recordAMI, c.recordMax, log.With("component", "recorder"))
		if err != nil {
			return fmt.Errorf("serve: --record-ami: %w", err)
		}
		defer rec.Close()
		acfg.Record = rec
	}
	client := ami.NewClient(acfg)
	eng := calls.New(calls.Config{Trunks: splitList(c.trunks), Log: log.With("component", "calls")})
	lk := link.New(client, eng, link.Config{ReconcileEvery: reconcileSetting(c.reconcile), Log: log.With("component", "link")})

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(link.NewCollector(lk, client))

	ln, err := net.Listen("tcp", c.admin)
	if err != nil {
		return fmt.Errorf("serve: admin listener: %w", err)
	}
	adminSrv := &http.Server{Handler: admin.NewHandler(reg, lk.Ready), ReadHeaderTimeout: 5 * time.Second}
	log.Info("ctibridge serving", "version", version, "ami", c.ami, "admin", ln.Addr().String())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	clientCtx, stopClient := context.WithCancel(context.Background())
	defer stopClient()
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		client.Run(clientCtx)
	}()
	wg.Go(func() {
		if err := lk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("link: %w", err)
		}
	})
	wg.Go(func() {
		if err := adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin: %w", err)
		}
	})

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("stopping", "err", runErr)
	}
	log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	adminSrv.Shutdown(sctx)
	cancel()
	wg.Wait()
	// The client goes last so that it can log off cleanly.
	stopClient()
	<-clientDone
	return runErr
}

// reconcileSetting maps the user's "0 disables" onto link.Config's
// "negative disables".
func reconcileSetting(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
