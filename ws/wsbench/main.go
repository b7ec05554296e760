// Command wsbench measures the WebSocket hub over loopback: it starts a
// server (itself, as a child process, so the server's memory is measured
// alone) with an engine that changes one extension at -rate changes per
// second, connects -clients clients that subscribe to the extensions, and
// reports change-to-client latency (engine publish to client read), the
// messages delivered per second and the server's resident memory.
//
//	go run ./ws/wsbench -clients 1000 -rate 500 -duration 20s
//	go run ./ws/wsbench -clients 10000 -rate 2 -duration 20s
//
// Raise `ulimit -n` above the client count first (Go raises the soft limit
// to the hard one by itself).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/loadtest"
	"github.com/ctibridge/ctibridge/ws"
)

func main() {
	serve := flag.Bool("serve", false, "run the server side (used by the parent)")
	clients := flag.Int("clients", 1000, "clients to connect")
	rate := flag.Float64("rate", 500, "changes per second the engine makes")
	exts := flag.Int("exts", 1000, "extensions in the PBX")
	duration := flag.Duration("duration", 20*time.Second, "measuring time, after every client has its snapshot")
	writeInterval := flag.Duration("write-interval", 0, "server: ws.Config.WriteInterval (0: the default)")
	view := flag.String("view", "panel", "what the clients may see: panel (everything) or user (redacted: one own extension)")
	flag.Parse()
	var err error
	if *serve {
		err = runServer(*rate, *exts, *view, *writeInterval)
	} else {
		err = runLoad(*clients, *rate, *exts, *duration, *view, *writeInterval)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wsbench:", err)
		os.Exit(1)
	}
}

func runServer(rate float64, exts int, view string, writeInterval time.Duration) error {
	hash, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{
		{Username: "panel", PasswordHash: string(hash), Endpoints: []string{"1000"}, Permissions: []string{auth.PermOperatorPanel}},
		{Username: "user", PasswordHash: string(hash), Endpoints: []string{"1000"}},
	})
	if err != nil {
		return err
	}
	svc := auth.NewService(users, auth.Config{TokenTTL: 24 * time.Hour})
	tok, _, err := svc.Tokens().Issue(view)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for i := range exts {
		names[strconv.Itoa(1000+i)] = fmt.Sprintf("Agent Number %d", i)
	}
	eng := calls.New(calls.Config{Names: names})
	eng.SetLink(calls.LinkResyncing)
	eng.EndResync()
	eng.Publish()
	hub, err := ws.NewHub(eng, svc, ws.Config{WriteInterval: writeInterval, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ws", hub)
	srv := &http.Server{Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go hub.Run(ctx)
	go srv.Serve(ln)
	if p := os.Getenv("WSBENCH_CPUPROFILE"); p != "" {
		go func() {
			time.Sleep(6 * time.Second)
			f, _ := os.Create(p)
			pprof.StartCPUProfile(f)
			time.Sleep(5 * time.Second)
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	fmt.Printf("ws://%s/ws %s\n", ln.Addr(), tok)

	// The engine: rate changes a second, one extension each, one Publish
	// each (the worst case: no batching by the engine). Ticks that come
	// late (a busy machine) are caught up, so the rate holds.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			srv.Close()
			hub.Close()
			return nil
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * rate)
		for ; i < due; i++ {
			st := "NOT_INUSE"
			if i/exts%2 == 0 {
				st = "INUSE"
			}
			eng.Apply(ami.NewMessage([]ami.Header{{Key: "Event", Value: "DeviceStateChange"}, {Key: "Device", Value: "PJSIP/" + strconv.Itoa(1000+i%exts)}, {Key: "State", Value: st}}...))
			eng.Publish()
		}
	}
}

// hist counts latencies in 1 ms buckets.
type hist [10001]uint64

func (h *hist) add(ms int64) {
	h[min(max(ms, 0), int64(len(h)-1))]++
}

func (h *hist) merge(o *hist) {
	for i := range h {
		h[i] += o[i]
	}
}

func (h *hist) quantile(q float64) int {
	if q >= 1 {
		for i := len(h) - 1; i > 0; i-- {
			if h[i] > 0 {
				return i
			}
		}
		return 0
	}
	var total uint64
	for _, n := range h {
		total += n
	}
	want := uint64(q * float64(total))
	var acc uint64
	for i, n := range h {
		acc += n
		if acc > want {
			return i
		}
	}
	return len(h) - 1
}

func (h *hist) count() (n uint64) {
	for _, c := range h {
		n += c
	}
	return n
}

func rss(pid int) (cur, peak string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?", "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			cur = f[1] + " kB"
		}
		if len(f) >= 2 && f[0] == "VmHWM:" {
			peak = f[1] + " kB"
		}
	}
	return cur, peak
}

func runLoad(n int, rate float64, exts int, duration time.Duration, view string, writeInterval time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-serve", "-rate", fmt.Sprint(rate), "-exts", fmt.Sprint(exts), "-view", view, "-write-interval", writeInterval.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	url, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	pid := cmd.Process.Pid
	r0, _ := rss(pid)
	fmt.Printf("server pid %d at %s; RSS before clients %s; GOMAXPROCS %d\n", pid, url, r0, runtime.GOMAXPROCS(0))

	var measuring atomic.Bool
	var msgs, first0, last0, lost, weird atomic.Uint64
	hists := make([]*hist, n)
	ready := make(chan error, n)
	var wg sync.WaitGroup
	conns := make([]*ws.Client, n)
	sem := make(chan struct{}, 64) // connect 64 at a time
	start := time.Now()
	for i := range n {
		hists[i] = new(hist)
		wg.Go(func() {
			sem <- struct{}{}
			c, err := ws.Dial(context.Background(), url, token)
			if err == nil {
				err = c.Subscribe("extensions")
			}
			<-sem
			if err != nil {
				ready <- err
				return
			}
			conns[i] = c
			gotSnapshot := false
			for {
				raw, err := c.ReadRaw()
				if err != nil {
					if !gotSnapshot {
						ready <- err
					} else if measuring.Load() {
						lost.Add(1)
						fmt.Fprintln(os.Stderr, "client lost:", err)
					}
					return
				}
				if !gotSnapshot {
					if bytes.HasPrefix(raw, []byte(`{"op":"snapshot"`)) {
						gotSnapshot = true
						ready <- nil
					}
					continue
				}
				if !measuring.Load() || !bytes.HasPrefix(raw, []byte(`{"op":"event"`)) {
					continue
				}
				now := time.Now().UnixMilli()
				d := now - int64(loadtest.UintField(raw, `"at":`))
				if d > 5000 && weird.Add(1) == 1 {
					fmt.Fprintf(os.Stderr, "late or odd event (%d ms): %.200s\n", d, raw)
				}
				hists[i].add(d)
				if i == 0 {
					seq := loadtest.UintField(raw, `"seq":`)
					if first0.Load() == 0 {
						first0.Store(seq)
					}
					last0.Store(seq)
				}
				msgs.Add(1)
			}
		})
	}
	for range n {
		if err := <-ready; err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	r1, _ := rss(pid)
	fmt.Printf("%d clients connected and subscribed in %v; server RSS %s\n", n, time.Since(start).Round(time.Millisecond), r1)
	time.Sleep(time.Second)
	measuring.Store(true)
	t0 := time.Now()
	var samples []string
	for el := time.Duration(0); el < duration; el += 5 * time.Second {
		time.Sleep(min(5*time.Second, duration-el))
		cur, _ := rss(pid)
		samples = append(samples, cur)
	}
	measuring.Store(false)
	el := time.Since(t0)
	total := new(hist)
	for _, h := range hists {
		total.merge(h)
	}
	cur, peak := rss(pid)
	fmt.Printf("client 0 saw seqs %d..%d (%.0f changes/s made); clients lost while measuring: %d\n",
		first0.Load(), last0.Load(), float64(last0.Load()-first0.Load())/el.Seconds(), lost.Load())
	fmt.Printf("measured %v: %d events delivered (%.0f/s; %.0f changes/s x %d clients = %.0f expected)\n",
		el.Round(time.Millisecond), total.count(), float64(msgs.Load())/el.Seconds(), rate, n, rate*float64(n))
	fmt.Printf("change-to-client latency ms: p50 %d p90 %d p99 %d p99.9 %d max %d\n",
		total.quantile(0.5), total.quantile(0.9), total.quantile(0.99), total.quantile(0.999), total.quantile(1))
	fmt.Printf("server RSS during the run %v; at the end %s; peak (VmHWM) %s\n", samples, cur, peak)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	return errors.Join()
}
