// Package wsbench is the lab's `ctibridge-lab wsbench` (Run): it measures
// the WebSocket hub over loopback. It starts a server (the lab itself, as
// a child process, so the server's memory is measured alone) with an engine that changes one extension at -rate changes per
// second, connects -clients clients that subscribe to the extensions, and
// reports change-to-client latency (engine publish to client read), the
// messages delivered per second, the server's resident memory and the CPU
// it used while measuring. The clients are read through epoll by a few
// goroutines (wsframe.Readers, screens.go), so the tool costs little
// next to the server; it reports its own CPU too. -floor replaces the
// hub by a bare loop writing each change to every socket (floor.go): the
// least any server can do, measured by the same clients.
//
//	go run ./cmd/ctibridge-lab wsbench -clients 1000 -rate 500 -duration 20s
//	go run ./cmd/ctibridge-lab wsbench -clients 10000 -rate 2 -duration 20s
//	go run ./cmd/ctibridge-lab wsbench -clients 10000 -rate 0 -duration 5s    # idle clients: memory per client
//	go run ./cmd/ctibridge-lab wsbench -clients 5000 -rate 2 -flood 1         # one client loops {"op":"subscribe"}
//	go run ./cmd/ctibridge-lab wsbench -clients 10000 -rate 2 -exts 5000 -floor # the floor
//
// With -flood N, N more clients of the same user, each in a process of
// its own (so that its sending takes no CPU from the measuring clients),
// connect once the others are subscribed and send -flood-op messages as
// fast as their sockets take them, reading nothing, while the others are
// measured: the run
// reports how the flood ended (the close code) and how much the server's
// memory grew. -flood-max-rss stops a flood that the server does not stop
// before it takes the machine's memory. -server runs another build's
// wsbench as the server (a baseline built from an older commit: its
// ctibridge-lab with the argument wsbench, or an older standalone
// wsbench), so both are driven by the same load.
//
// With -url the clients attach to a server this run did not start (a
// `ctibridge serve` or `ctibridge edge`; attach.go): with -pid its RSS per
// client and its CPU per delivered event are read from /proc, with
// -stamps (`ctibridge-lab loadtest synth --serve-ami --stamps`) each screen's
// ringing is timed from the moment the call was placed on the synthetic
// PBX (ringing.go), and -ready/-go let several wsbench processes, one per
// server, measure the same window. bench/edges.sh drives it.
//
//	go run ./cmd/ctibridge-lab wsbench -url ws://127.0.0.1:8080/ws -login admin:admin -pid 1234 -clients 10000 -stamps /tmp/stamps -duration 20s -out edge1.json
//
// Raise `ulimit -n` above the client count first (Go raises the soft limit
// to the hard one by itself).
package wsbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	runpprof "runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/loadtest"
	"github.com/ctibridge/ctibridge/ws"
)

// loadConfig is the load side's flags.
type loadConfig struct {
	self          []string // the command that runs wsbench (Run's self)
	server        string
	clients       int
	rate          float64
	burst         int
	exts          int
	duration      time.Duration
	view          string
	writeInterval time.Duration
	writeRate     float64
	flood         int
	floodOp       string
	floodMaxRSS   int64 // kB
	readers       int
	floor         bool
	attach        attachConfig
}

// Run is `ctibridge-lab wsbench args...`; self is the command that runs
// wsbench again (the lab binary and "wsbench"), for the server and the
// flooders' processes.
func Run(self, args []string) error {
	fs := flag.NewFlagSet("wsbench", flag.ContinueOnError)
	serve := fs.Bool("serve", false, "run the server side (used by the parent)")
	var cfg loadConfig
	fs.StringVar(&cfg.server, "server", "", "the command to run as the server: another build's wsbench (a baseline), its arguments split on spaces (\"/tmp/base-lab wsbench\"; default: this one)")
	fs.IntVar(&cfg.clients, "clients", 1000, "clients to connect")
	fs.Float64Var(&cfg.rate, "rate", 500, "changes per second the engine makes")
	fs.IntVar(&cfg.burst, "burst", 1, "the changes come in groups of this many, back to back (a call's start changes several entities at once)")
	fs.IntVar(&cfg.exts, "exts", 1000, "extensions in the PBX")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "measuring time, after every client has its snapshot")
	fs.DurationVar(&cfg.writeInterval, "write-interval", 0, "server: WriteInterval of a -server build that has it (before WriteRate; 0: its default)")
	fs.Float64Var(&cfg.writeRate, "write-rate", 0, "server: ws.Config.WriteRate (0: the default; negative: no limit)")
	fs.StringVar(&cfg.view, "view", "panel", "what the clients may see: panel (everything) or user (redacted: one own extension)")
	fs.IntVar(&cfg.flood, "flood", 0, "flooding clients started with the measurement")
	fs.StringVar(&cfg.floodOp, "flood-op", "subscribe", "what they send in a loop: subscribe, resume, ping or garbage")
	fs.Int64Var(&cfg.floodMaxRSS, "flood-max-rss", 2<<20, "kB: stop the flood when the server's RSS passes it")
	floodURL := fs.String("flood-url", "", "run one flooding client against this URL (used by the parent)")
	floodToken := fs.String("flood-token", "", "its token (used by the parent)")
	fs.IntVar(&cfg.readers, "readers", runtime.GOMAXPROCS(0), "goroutines reading the clients' sockets (epoll)")
	fs.BoolVar(&cfg.floor, "floor", false, "server: instead of the hub, a bare loop writing each change's frame to every client (the floor)")
	a := &cfg.attach
	fs.StringVar(&a.url, "url", "", "attach to this running server (ws://host:port/ws: a ctibridge serve or edge) instead of starting one (bench/edges.sh)")
	fs.StringVar(&a.login, "login", "", "with -url: log in as user:password")
	fs.StringVar(&a.token, "token", "", "with -url: the clients' token (instead of -login)")
	fs.IntVar(&a.pid, "pid", 0, "with -url: the server's process id, for its RSS and CPU")
	fs.StringVar(&a.admin, "admin", "", "with -url: the server's admin listener (http://host:port), for the hub's counters")
	fs.StringVar(&a.stamps, "stamps", "", "with -url: the calls' start times (ctibridge-lab loadtest synth --serve-ami --stamps): time each screen's ringing from them")
	fs.StringVar(&a.callsOut, "calls-out", "", "with -stamps: write each call's screens' median and max latency to this file, a line per call (to pair two servers' files)")
	fs.DurationVar(&a.idleCPU, "idle-cpu", 0, "with -url and -pid: first measure the server's CPU without the clients for this long")
	fs.StringVar(&a.ready, "ready", "", "with -url: write this file when every client has its snapshot")
	fs.StringVar(&a.goFile, "go", "", "with -url: then wait for this file to exist before measuring")
	fs.StringVar(&a.out, "out", "", "with -url: write the result as JSON to this file")
	fs.StringVar(&a.label, "label", "server", "with -url: the server's name in the output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.self = self
	var err error
	if a.url != "" {
		err = runAttach(cfg)
	} else if *floodURL != "" {
		err = runFlooder(*floodURL, *floodToken, cfg.floodOp)
	} else if *serve {
		if cfg.floor {
			err = runFloor(cfg.rate, cfg.burst)
		} else if cfg.writeInterval != 0 {
			err = errors.New("-write-interval: this build has ws.Config.WriteRate instead")
		} else {
			err = runServer(cfg.rate, cfg.burst, cfg.exts, cfg.view, cfg.writeRate)
		}
	} else {
		err = runLoad(cfg)
	}
	return err
}

func runServer(rate float64, burst, exts int, view string, writeRate float64) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	h, err := startHub(ctx, exts, view, writeRate)
	if err != nil {
		return err
	}
	defer h.close()
	if p := os.Getenv("WSBENCH_CPUPROFILE"); p != "" {
		// From 6 s after the start for 5 s (the clients connecting, at
		// 10,000), or from WSBENCH_CPUPROFILE_DELAY (the measuring).
		delay := 6 * time.Second
		if d, err := time.ParseDuration(os.Getenv("WSBENCH_CPUPROFILE_DELAY")); err == nil {
			delay = d
		}
		go func() {
			time.Sleep(delay)
			f, _ := os.Create(p)
			runpprof.StartCPUProfile(f)
			time.Sleep(5 * time.Second)
			runpprof.StopCPUProfile()
			f.Close()
		}()
	}
	fmt.Printf("%s %s\n", h.url, h.token)

	// The engine: rate changes a second (in groups of burst), one
	// extension each, one Publish each (the worst case: no batching by
	// the engine).
	paceChanges(ctx, rate, burst, func(i int) {
		st := "NOT_INUSE"
		if i/exts%2 == 0 {
			st = "INUSE"
		}
		h.devState(1000+i%exts, st)
	})
	return nil
}

// hub is the server side of a run: an engine with exts extensions (1000
// and up), a hub on it and an HTTP server on loopback serving /ws,
// /memstats, /metrics and /debug/pprof.
type hub struct {
	eng   *calls.Engine
	hub   *ws.Hub
	srv   *http.Server
	url   string // ws://127.0.0.1:PORT/ws
	token string // of the user named view
}

func startHub(ctx context.Context, exts int, view string, writeRate float64) (*hub, error) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{
		{Username: "panel", PasswordHash: string(hash), Endpoints: []string{"1000"}, Permissions: []string{auth.PermOperatorPanel}},
		{Username: "user", PasswordHash: string(hash), Endpoints: []string{"1000"}},
	})
	if err != nil {
		return nil, err
	}
	svc := auth.NewService(users, auth.Config{TokenTTL: 24 * time.Hour})
	tok, _, err := svc.Tokens().Issue(view)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for i := range exts {
		names[strconv.Itoa(1000+i)] = fmt.Sprintf("Agent Number %d", i)
	}
	eng := calls.New(calls.Config{Names: names, Opaque: auth.Opaquer{}})
	eng.SetLink(calls.LinkResyncing)
	eng.EndResync()
	eng.Publish()
	reg := prometheus.NewRegistry()
	wh, err := ws.NewHub(eng, svc, ws.Config{WriteRate: writeRate, Registerer: reg, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ws", wh)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /memstats", memStats)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux}
	go wh.Run(ctx)
	go srv.Serve(ln)
	return &hub{eng: eng, hub: wh, srv: srv, url: fmt.Sprintf("ws://%s/ws", ln.Addr()), token: tok}, nil
}

// devState changes extension exten's device state (INUSE, RINGING, ...)
// and publishes: one extenUpdate.
func (h *hub) devState(exten int, st string) {
	h.eng.Apply(ami.NewMessage([]ami.Header{{Key: "Event", Value: ami.EventDeviceStateChange}, {Key: "Device", Value: "PJSIP/" + strconv.Itoa(exten)}, {Key: "State", Value: st}}...))
	h.eng.Publish()
}

func (h *hub) close() {
	h.srv.Close()
	h.hub.Close()
}

// paceChanges calls change(i) for i = 0, 1, ... at rate calls a second,
// in groups of burst, until ctx is done. Ticks that come late (a busy
// machine) are caught up, so the rate holds.
func paceChanges(ctx context.Context, rate float64, burst int, change func(i int)) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds()*rate/float64(burst)) * burst
		for ; i < due; i++ {
			change(i)
		}
	}
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

// memStats answers the heap and stack figures after collections, so that
// a run can tell the server's own memory from what the runtime keeps.
func memStats(w http.ResponseWriter, _ *http.Request) {
	for range 3 { // a goroutine stack is halved at most once per collection
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	json.NewEncoder(w).Encode(map[string]uint64{
		"heap_inuse": m.HeapInuse, "stack_inuse": m.StackInuse, "sys": m.Sys,
		"goroutines": uint64(runtime.NumGoroutine()),
	})
}

// procCPU is the CPU time a process has used (/proc/PID/stat utime+stime).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

func rssKB(pid int) int64 {
	cur, _ := rss(pid)
	n, _ := strconv.ParseInt(strings.TrimSuffix(cur, " kB"), 10, 64)
	return n
}

// server is the child process serving /ws.
type server struct {
	cmd   *exec.Cmd
	pid   int
	url   string
	token string
	admin string // where /metrics is, when not beside /ws (-url's -admin)
}

func startServer(cfg loadConfig) (*server, error) {
	cmdline := cfg.self
	if cfg.server != "" {
		cmdline = strings.Fields(cfg.server)
	}
	args := []string{"-serve", "-rate", fmt.Sprint(cfg.rate), "-exts", fmt.Sprint(cfg.exts), "-view", cfg.view}
	if cfg.burst > 1 {
		args = append(args, "-burst", fmt.Sprint(cfg.burst))
	}
	if cfg.writeInterval != 0 {
		args = append(args, "-write-interval", cfg.writeInterval.String())
	}
	if cfg.floor {
		args = append(args, "-floor")
	}
	if cfg.writeRate != 0 {
		args = append(args, "-write-rate", fmt.Sprint(cfg.writeRate))
	}
	cmd := exec.Command(cmdline[0], append(cmdline[1:len(cmdline):len(cmdline)], args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("server: %w", err)
	}
	url, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	return &server{cmd: cmd, pid: cmd.Process.Pid, url: url, token: token}, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	s.cmd.Wait()
}

// get fetches a path of the server's; empty when it has none (an older
// build).
func (s *server) get(path string) string {
	root := s.admin
	if root == "" {
		root = "http" + strings.TrimSuffix(strings.TrimPrefix(s.url, "ws"), "/ws")
	}
	resp, err := http.Get(strings.TrimSuffix(root, "/") + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// counters reads the hub's counters from /metrics: messages and socket
// writes so far, the fan-outs that waited for the write budget and the
// clients closed for sending too much; ok is false for a build without
// them.
func (s *server) counters() (msgs, writes, paced, floods float64, ok bool) {
	m := s.get("/metrics")
	val := func(name string) (float64, bool) {
		for line := range strings.Lines(m) {
			if v, found := strings.CutPrefix(line, name+" "); found {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	msgs, ok1 := val("ctibridge_ws_messages_sent_total")
	writes, ok2 := val("ctibridge_ws_writes_total")
	paced, ok3 := val("ctibridge_ws_fanout_paced_total")
	floods, ok4 := val(`ctibridge_ws_closed_total{reason="flood"}`)
	return msgs, writes, paced, floods, ok1 && ok2 && ok3 && ok4
}

func runLoad(cfg loadConfig) error {
	srv, err := startServer(cfg)
	if err != nil {
		return err
	}
	defer srv.stop()
	n := cfg.clients
	r0 := rssKB(srv.pid)
	fmt.Printf("server pid %d at %s; RSS before clients %d kB; GOMAXPROCS %d\n", srv.pid, srv.url, r0, runtime.GOMAXPROCS(0))

	l, err := newLoad(n, cfg.readers, false)
	if err != nil {
		return err
	}
	defer l.readers.Close()
	start := time.Now()
	if err := l.connect(srv.url, srv.token, n); err != nil {
		return err
	}
	for range n {
		if err := <-l.ready; err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	r1 := rssKB(srv.pid)
	fmt.Printf("%d clients connected and subscribed in %v; server RSS %d kB (%d bytes per client)\n",
		n, time.Since(start).Round(time.Millisecond), r1, (r1-r0)*1024/int64(max(n, 1)))
	time.Sleep(time.Second)
	if ms := srv.get("/memstats"); ms != "" {
		fmt.Printf("server memstats after 3 GCs: %s\n", ms)
	}
	rBefore := rssKB(srv.pid)
	l.measuring.Store(true)
	t0, cpu0, self0 := time.Now(), procCPU(srv.pid), loadtest.CPUTime()
	m0, w0, p0, _, hasCounters := srv.counters()
	fs, err := startFlooders(cfg.self, cfg.flood, srv.url, srv.token, cfg.floodOp)
	if err != nil {
		return err
	}
	var once sync.Once
	var floods []floodResult
	stop := func() { once.Do(func() { floods = fs.stop() }) }
	samples, peak := watch(srv.pid, cfg, stop)
	l.measuring.Store(false)
	el, cpu, self := time.Since(t0), procCPU(srv.pid)-cpu0, loadtest.CPUTime()-self0
	m1, w1, p1, _, _ := srv.counters()
	stop()
	l.report(cfg, el)
	fmt.Printf("load tool CPU while measuring %.2f cores (%d reader goroutines)\n", self.Seconds()/el.Seconds(), cfg.readers)
	fmt.Printf("server CPU while measuring %.2f cores; RSS during the run %v kB; at the end %d kB; peak %d kB (%+d kB over the start of the run)\n",
		cpu.Seconds()/el.Seconds(), samples, rssKB(srv.pid), peak, peak-rBefore)
	if hasCounters {
		fmt.Printf("server wrote %.0f messages in %.0f socket writes (%.2f per write); the fan-out waited for its write budget %.0f times\n",
			m1-m0, w1-w0, (m1-m0)/max(w1-w0, 1), p1-p0)
	}
	var closed []string
	for line := range strings.Lines(srv.get("/metrics")) {
		if strings.HasPrefix(line, "ctibridge_ws_closed_total{") && !strings.HasSuffix(strings.TrimSpace(line), " 0") {
			closed = append(closed, strings.TrimSpace(strings.TrimPrefix(line, "ctibridge_ws_closed_total")))
		}
	}
	if len(closed) > 0 {
		fmt.Printf("server closed clients: %s\n", strings.Join(closed, ", "))
	}
	for _, f := range floods {
		fmt.Printf("flooder (%s): %d messages sent; ended after %v: %s\n", cfg.floodOp, f.sent, f.ended.Round(time.Millisecond), f.how)
	}
	if _, _, _, fl, ok := srv.counters(); ok && cfg.flood > 0 {
		// A flooder that reads nothing may never see its close frame (the
		// server's reset can discard it), so the server says.
		fmt.Printf("server: clients closed for sending too much (4008): %.0f\n", fl)
	}
	return nil
}

// watch samples the server's RSS every 100 ms for the run's duration and
// stops the flood if the RSS passes the limit; it returns one sample per
// 5 s and the peak.
func watch(pid int, cfg loadConfig, stopFlood func()) (samples []int64, peak int64) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(cfg.duration)
	next := time.Now().Add(5 * time.Second)
	stopped := false
	for now := time.Now(); now.Before(end); now = <-tick.C {
		cur := rssKB(pid)
		peak = max(peak, cur)
		if cfg.flood > 0 && !stopped && cur > cfg.floodMaxRSS {
			fmt.Fprintf(os.Stderr, "server RSS %d kB passed -flood-max-rss: flood stopped\n", cur)
			stopFlood()
			stopped = true
		}
		if !now.Before(next) {
			samples = append(samples, cur)
			next = next.Add(5 * time.Second)
		}
	}
	return samples, peak
}

func (l *load) report(cfg loadConfig, el time.Duration) {
	total := new(loadtest.Histogram)
	for _, h := range l.hists {
		total.Merge(h)
	}
	fmt.Printf("client 0 saw seqs %d..%d (%.0f changes/s made); clients lost while measuring: %d\n",
		l.first0.Load(), l.last0.Load(), float64(l.last0.Load()-l.first0.Load())/el.Seconds(), l.lost.Load())
	expected := fmt.Sprintf("; %.0f changes/s x %d clients = %.0f expected", cfg.rate, cfg.clients, cfg.rate*float64(cfg.clients))
	if cfg.attach.url != "" {
		expected = ""
	}
	fmt.Printf("measured %v: %d events delivered (%.0f/s%s)\n",
		el.Round(time.Millisecond), total.Count(), float64(l.msgs.Load())/el.Seconds(), expected)
	fmt.Printf("change-to-client latency ms: p50 %d p90 %d p99 %d p99.9 %d max %d\n",
		ms(total.Quantile(0.5)), ms(total.Quantile(0.9)), ms(total.Quantile(0.99)), ms(total.Quantile(0.999)), ms(total.Max()))
}

// ms is d in whole milliseconds, as the report prints latencies.
func ms(d time.Duration) int64 { return d.Milliseconds() }
