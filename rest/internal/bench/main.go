// Command bench serves the same JSON bytes three ways for wrk and
// `ctibridge loadtest http`, so the REST read path can be compared with a
// bare net/http handler in one sitting (docs/http-pipelining.md). It is
// the REST server half of bench/run.sh and rest/internal/bench/run.sh; it
// stays under rest/internal because it uses rest/internal/synth, the
// synthetic state of the REST benchmarks (docs/loadtest.md). The fasthttp
// baseline lives in ./fasthttp, a module of its own, so that the product
// never depends on fasthttp.
//
//	go run ./rest/internal/bench -mode ctibridge -ext 100 -addr 127.0.0.1:8081 -token-out /tmp/tok
//	go run ./rest/internal/bench -mode bare -ext 100 -addr 127.0.0.1:8082 -body-out /tmp/ext100.json
//
// Modes: ctibridge (rest.NewHandler behind httpserve.New, coalescing on
// unless -coalesce=false), bare (a handler writing the bytes with
// Content-Type and Content-Length, behind a plain http.Server, or behind
// the coalescing listener with -coalesce).
package main

import (
	"flag"
	"fmt"
	"log"
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
	"github.com/ctibridge/ctibridge/rest/internal/synth"
)

func main() {
	mode := flag.String("mode", "ctibridge", "ctibridge or bare")
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	exts := flag.Int("ext", 100, "extensions in the synthetic state")
	inCall := flag.Int("incall", 30, "extensions in a call")
	what := flag.String("body", "extensions", "bare mode: extensions or status")
	coalesce := flag.Bool("coalesce", true, "coalesce pipelined responses (ctibridge mode; bare mode only when set explicitly)")
	bodyOut := flag.String("body-out", "", "write the body served in bare mode to this file")
	tokenOut := flag.String("token-out", "", "write an admin token (ctibridge mode) to this file")
	user := flag.String("user", "root", "ctibridge mode: user of the token: root (admin) or alice (filtered view)")
	churn := flag.Int("churn", 0, "ctibridge mode: AMI events applied per second while serving")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the first 8 s after start-up to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		time.AfterFunc(8*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
	}

	var explicitCoalesce bool
	flag.Visit(func(f *flag.Flag) { explicitCoalesce = explicitCoalesce || f.Name == "coalesce" })

	o := synth.Options{Extensions: *exts, InCall: *inCall}
	eng := synth.Engine(o)
	s := eng.Snapshot()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	switch *mode {
	case "bare":
		body := s.ExtensionsJSON()
		if *what == "status" {
			body = s.StatusJSON()
		}
		if *bodyOut != "" {
			if err := os.WriteFile(*bodyOut, body, 0o644); err != nil {
				log.Fatal(err)
			}
		}
		clen := strconv.Itoa(len(body))
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", clen)
			w.Write(body)
		})
		if *coalesce && explicitCoalesce {
			ln = httpserve.NewCoalescingListener(ln)
		}
		fmt.Fprintf(os.Stderr, "bare: %d bytes on %s (coalesce %v)\n", len(body), ln.Addr(), *coalesce && explicitCoalesce)
		srv := &http.Server{Handler: h, ConnState: httpserve.ConnStateHook(nil)}
		log.Fatal(srv.Serve(ln))
	case "ctibridge":
		hash, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
		users, err := auth.NewUsers([]auth.User{
			{Username: "root", PasswordHash: string(hash), Role: auth.RoleAdmin},
			{Username: "alice", PasswordHash: string(hash), Role: auth.RoleUser, Endpoints: []string{synth.Exten(0)}},
		})
		if err != nil {
			log.Fatal(err)
		}
		svc := auth.NewService(users, auth.Config{})
		tok, _, _ := svc.Tokens().Issue(*user)
		if *tokenOut != "" {
			os.WriteFile(*tokenOut, []byte(tok), 0o600)
		}
		h, err := rest.NewHandler(rest.Config{Auth: svc, State: eng, Metrics: rest.NewMetrics()})
		if err != nil {
			log.Fatal(err)
		}
		srv, err := httpserve.New(httpserve.Config{NoCoalesce: !*coalesce}, h)
		if err != nil {
			log.Fatal(err)
		}
		if *churn > 0 {
			go runChurn(eng, o, *churn)
		}
		fmt.Fprintf(os.Stderr, "ctibridge: %d extensions, %d bytes on %s (coalesce %v, churn %d/s)\n",
			*exts, len(s.ExtensionsJSON()), ln.Addr(), *coalesce, *churn)
		log.Fatal(srv.Serve(ln))
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
}

// runChurn applies rate events per second in batches every 10 ms, each
// batch published, as the link goroutine does with what one read brings.
// It runs on its own goroutine, the engine's only one.
func runChurn(eng *calls.Engine, o synth.Options, rate int) {
	t := time.NewTicker(10 * time.Millisecond)
	per := max(1, rate/100)
	i := 0
	for range t.C {
		for range per {
			eng.Apply(synth.Churn(o, i))
			i++
		}
		eng.Publish()
	}
}
