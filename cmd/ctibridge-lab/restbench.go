// restbench is `ctibridge-lab restbench`: it serves the same JSON bytes
// three ways for wrk and `ctibridge-lab loadtest http`, so the REST read
// path can be compared with a bare net/http handler in one sitting
// (docs/http-pipelining.md). It is the REST server half of bench/run.sh
// and bench/rest.sh; its synthetic state is rest/resttest's, the REST
// benchmarks' (docs/loadtest.md). The fasthttp baseline lives in
// bench/fasthttp, a module of its own, so that the product never depends
// on fasthttp.
//
//	go run ./cmd/ctibridge-lab restbench -mode ctibridge -ext 100 -addr 127.0.0.1:8081 -token-out /tmp/tok
//	go run ./cmd/ctibridge-lab restbench -mode bare -ext 100 -addr 127.0.0.1:8082 -body-out /tmp/ext100.json
//	go run ./cmd/ctibridge-lab restbench -mode bare -addr 127.0.0.1:8082 -body-file /tmp/served.json
//
// Modes: ctibridge (rest.NewHandler behind httpserve.New, coalescing on
// unless -coalesce=false), bare (a handler writing the bytes with
// Content-Type and Content-Length, behind a plain http.Server, or behind
// the coalescing listener with -coalesce).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/httpserve"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// restBenchConfig is restbench's flags.
type restBenchConfig struct {
	mode, addr, what, bodyOut, bodyFile, tokenOut, user, cpuProfile string
	exts, inCall, churn                                             int
	coalesce, explicitCoalesce                                      bool
}

func restBench(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("restbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c restBenchConfig
	fs.StringVar(&c.mode, "mode", "ctibridge", "ctibridge or bare")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "listen address")
	fs.IntVar(&c.exts, "ext", 100, "extensions in the synthetic state")
	fs.IntVar(&c.inCall, "incall", 30, "extensions in a call")
	fs.StringVar(&c.what, "body", "extensions", "bare mode: extensions or status")
	fs.BoolVar(&c.coalesce, "coalesce", true, "coalesce pipelined responses (ctibridge mode; bare mode only when set explicitly)")
	fs.StringVar(&c.bodyOut, "body-out", "", "write the body served in bare mode to this file")
	fs.StringVar(&c.bodyFile, "body-file", "", "bare mode: serve this file's bytes (what a real serve answered) instead of the synthetic state's")
	fs.StringVar(&c.tokenOut, "token-out", "", "write an admin token (ctibridge mode) to this file")
	fs.StringVar(&c.user, "user", "root", "ctibridge mode: user of the token: root (admin) or alice (filtered view)")
	fs.IntVar(&c.churn, "churn", 0, "ctibridge mode: AMI events applied per second while serving")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the first 8 s after start-up to this file")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { c.explicitCoalesce = c.explicitCoalesce || f.Name == "coalesce" })
	if c.mode != "bare" && c.mode != "ctibridge" {
		return fmt.Errorf("restbench: unknown mode %q (ctibridge or bare)", c.mode)
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		time.AfterFunc(8*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
	}
	o := resttest.Options{Extensions: c.exts, InCall: c.inCall}
	eng := resttest.Engine(o)
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	var srv interface {
		Serve(net.Listener) error
		Shutdown(context.Context) error
	}
	if c.mode == "bare" {
		srv, ln, err = benchBare(c, eng.Snapshot(), ln, stderr)
	} else {
		srv, err = benchCTI(c, eng, ln, stderr)
		if err == nil && c.churn > 0 {
			go runChurn(eng, o, c.churn)
		}
	}
	if err != nil {
		ln.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { srv.Shutdown(context.Background()) })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// benchBare is the bare mode's server: the snapshot's bytes from a
// handler of a few lines.
func benchBare(c restBenchConfig, s *calls.Snapshot, ln net.Listener, stderr io.Writer) (*http.Server, net.Listener, error) {
	body := s.ExtensionsJSON()
	if c.what == "status" {
		body = s.StatusJSON()
	}
	if c.bodyFile != "" {
		var err error
		if body, err = os.ReadFile(c.bodyFile); err != nil {
			return nil, ln, err
		}
	}
	if c.bodyOut != "" {
		if err := os.WriteFile(c.bodyOut, body, 0o644); err != nil {
			return nil, ln, err
		}
	}
	clen := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", clen)
		w.Write(body)
	})
	coalesce := c.coalesce && c.explicitCoalesce
	if coalesce {
		ln = httpserve.NewCoalescingListener(ln)
	}
	fmt.Fprintf(stderr, "bare: %d bytes on %s (coalesce %v)\n", len(body), ln.Addr(), coalesce)
	return &http.Server{Handler: h, ConnState: httpserve.ConnStateHook(nil)}, ln, nil
}

// benchCTI is the ctibridge mode's server: rest's handler behind
// httpserve, users root (admin) and alice (one extension), the token of
// c.user written to c.tokenOut.
func benchCTI(c restBenchConfig, eng *calls.Engine, ln net.Listener, stderr io.Writer) (*httpserve.Server, error) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{
		{Username: "root", PasswordHash: string(hash), Role: auth.RoleAdmin},
		{Username: "alice", PasswordHash: string(hash), Role: auth.RoleUser, Endpoints: []string{resttest.Exten(0)}},
	})
	if err != nil {
		return nil, err
	}
	svc := auth.NewService(users, auth.Config{})
	tok, _, err := svc.Tokens().Issue(c.user)
	if err != nil {
		return nil, fmt.Errorf("restbench: -user %s: %w", c.user, err)
	}
	if c.tokenOut != "" {
		if err := os.WriteFile(c.tokenOut, []byte(tok), 0o600); err != nil {
			return nil, err
		}
	}
	h, err := rest.NewHandler(rest.Config{Auth: svc, State: eng, Metrics: rest.NewMetrics()})
	if err != nil {
		return nil, err
	}
	srv, err := httpserve.New(httpserve.Config{NoCoalesce: !c.coalesce}, h)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "ctibridge: %d extensions, %d bytes on %s (coalesce %v, churn %d/s)\n",
		c.exts, len(eng.Snapshot().ExtensionsJSON()), ln.Addr(), c.coalesce, c.churn)
	return srv, nil
}

// runChurn applies rate events per second in batches every 10 ms, each
// batch published, as the link goroutine does with what one read brings.
// It runs on its own goroutine, the engine's only one.
func runChurn(eng *calls.Engine, o resttest.Options, rate int) {
	t := time.NewTicker(10 * time.Millisecond)
	per := max(1, rate/100)
	i := 0
	for range t.C {
		for range per {
			eng.Apply(resttest.Churn(o, i))
			i++
		}
		eng.Publish()
	}
}
