package wsbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// attachConfig is -url's flags: the clients of a server this run did not
// start (a `ctibridge serve` or `ctibridge edge`, bench/edges.sh).
type attachConfig struct {
	url      string        // ws://host:port/ws
	login    string        // user:password, POST /auth/login
	token    string        // or a token
	pid      int           // the server's process, for its RSS and CPU from /proc (0: not measured)
	admin    string        // the server's admin listener, for the hub's counters in /metrics
	stamps   string        // calls' start times (loadtest synth --serve-ami --stamps): ringing latency
	callsOut string        // with stamps: each call's screens' median and max latency (ringResult.writeCalls)
	idleCPU  time.Duration // before connecting, the server's CPU over this long (its cost without clients)
	ready    string        // written once every client has its snapshot
	goFile   string        // measuring starts when it exists (the barrier of several wsbench processes)
	out      string        // the result as JSON
	label    string
}

// attachResult is what -out holds.
type attachResult struct {
	Label            string    `json:"label"`
	Clients          int       `json:"clients"`
	ConnectSeconds   float64   `json:"connect_s"`
	IdleCPUCores     float64   `json:"server_idle_cpu_cores"` // -idle-cpu: before the clients
	RSSBeforeKB      int64     `json:"rss_before_kb"`
	RSSConnectedKB   int64     `json:"rss_connected_kb"`
	BytesPerClient   int64     `json:"rss_bytes_per_client"`
	RSSPeakKB        int64     `json:"rss_peak_kb"`
	Seconds          float64   `json:"measured_s"`
	ServerCPUSeconds float64   `json:"server_cpu_s"`
	ServerCPUCores   float64   `json:"server_cpu_cores"`
	ToolCPUCores     float64   `json:"tool_cpu_cores"`
	Delivered        uint64    `json:"delivered"`       // events the clients read
	Changes          uint64    `json:"changes"`         // seqs client 0 saw go by
	ServerMessages   float64   `json:"server_messages"` // the hub's count, when -admin
	ServerWrites     float64   `json:"server_writes"`   // socket writes, when -admin
	CPUPerDelivered  float64   `json:"cpu_us_per_delivered"`
	CPUPerChange     float64   `json:"cpu_ms_per_change"`
	Lost             uint64    `json:"clients_lost"`
	ChangeP50        int64     `json:"change_ms_p50"` // publish (at) to read, ms
	ChangeP99        int64     `json:"change_ms_p99"`
	Ring             *ringJSON `json:"ringing,omitempty"`
	LoadAvg          string    `json:"loadavg"`
}

// ringJSON is the ringing latency of attachResult: call placed (the
// stamp) to ringing on a screen.
type ringJSON struct {
	Count     uint64  `json:"count"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	Unmatched int     `json:"unmatched"` // ringing with no call placed before it
	Expected  int     `json:"expected"`  // calls of the window times clients
	Missing   int     `json:"missing"`   // of those, not seen ringing
}

// runAttach connects cfg.clients clients to a running server, waits for
// the barrier, measures for cfg.duration and reports: the server's RSS
// per client, its CPU per delivered event and per change, the
// change-to-client latency from the events' at, and with -stamps the
// call-placed-to-ringing-on-screen latency.
func runAttach(cfg loadConfig) error {
	a := cfg.attach
	ctx := context.Background()
	res := attachResult{Label: a.label, Clients: cfg.clients}
	token := a.token
	if a.login != "" {
		user, pass, _ := strings.Cut(a.login, ":")
		var err error
		if token, err = loadtest.Login(ctx, "http"+strings.TrimSuffix(strings.TrimPrefix(a.url, "ws"), "/ws"), user, pass, false); err != nil {
			return err
		}
	}
	if a.pid > 0 && a.idleCPU > 0 {
		c0 := procCPU(a.pid)
		time.Sleep(a.idleCPU)
		res.IdleCPUCores = (procCPU(a.pid) - c0).Seconds() / a.idleCPU.Seconds()
	}
	res.RSSBeforeKB = rssKB(a.pid)
	l, err := newLoad(cfg.clients, cfg.readers, a.stamps != "")
	if err != nil {
		return err
	}
	defer l.readers.Close()
	start := time.Now()
	if err := l.connect(a.url, token, cfg.clients); err != nil {
		return err
	}
	for range cfg.clients {
		if err := <-l.ready; err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	res.ConnectSeconds = time.Since(start).Seconds()
	time.Sleep(time.Second)
	res.RSSConnectedKB = rssKB(a.pid)
	res.BytesPerClient = (res.RSSConnectedKB - res.RSSBeforeKB) * 1024 / int64(max(cfg.clients, 1))
	fmt.Printf("%s: %d clients subscribed in %.1f s; server RSS %d kB, was %d (%d bytes per client)\n",
		a.label, cfg.clients, res.ConnectSeconds, res.RSSConnectedKB, res.RSSBeforeKB, res.BytesPerClient)
	if err := barrier(a.ready, a.goFile); err != nil {
		return err
	}

	srv := &server{url: a.url, admin: a.admin}
	l.measuring.Store(true)
	t0, cpu0, self0 := time.Now(), procCPU(a.pid), loadtest.CPUTime()
	m0, w0, _, _, hasCounters := srv.counters()
	_, peak := watch(a.pid, cfg, func() {})
	l.measuring.Store(false)
	t1 := time.Now()
	el, cpu := t1.Sub(t0), procCPU(a.pid)-cpu0
	m1, w1, _, _, _ := srv.counters()
	l.report(cfg, el)
	res.Seconds, res.ServerCPUSeconds = el.Seconds(), cpu.Seconds()
	res.ServerCPUCores, res.ToolCPUCores = cpu.Seconds()/el.Seconds(), (loadtest.CPUTime()-self0).Seconds()/el.Seconds()
	res.RSSPeakKB = peak
	res.Delivered, res.Changes, res.Lost = l.msgs.Load(), l.last0.Load()-l.first0.Load(), l.lost.Load()
	if hasCounters {
		res.ServerMessages, res.ServerWrites = m1-m0, w1-w0
	}
	if res.Delivered > 0 {
		res.CPUPerDelivered = cpu.Seconds() * 1e6 / float64(res.Delivered)
	}
	if res.Changes > 0 {
		res.CPUPerChange = cpu.Seconds() * 1e3 / float64(res.Changes)
	}
	total := new(loadtest.Histogram)
	for _, h := range l.hists {
		total.Merge(h)
	}
	res.ChangeP50, res.ChangeP99 = ms(total.Quantile(0.5)), ms(total.Quantile(0.99))
	fmt.Printf("%s: server CPU %.3f cores while measuring (%.1f µs per delivered event, %.2f ms per change); %.3f cores before the clients; RSS peak %d kB; load tool %.2f cores\n",
		a.label, res.ServerCPUCores, res.CPUPerDelivered, res.CPUPerChange, res.IdleCPUCores, peak, res.ToolCPUCores)
	l.readers.Close() // the workers are done with l.rings
	if a.stamps != "" {
		if err := res.addRings(l, a.stamps, a.callsOut, cfg.clients, t0, t1); err != nil {
			return err
		}
	}
	b, _ := os.ReadFile("/proc/loadavg")
	res.LoadAvg = strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
	if a.out != "" {
		j, _ := json.Marshal(res)
		return os.WriteFile(a.out, append(j, '\n'), 0o644)
	}
	return nil
}

// addRings matches the screens' ringing to the stamps: the calls placed
// from the window's start to 2 s before its end are expected on every
// screen.
func (res *attachResult) addRings(l *load, path, callsOut string, clients int, t0, t1 time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	st, err := readStamps(f)
	f.Close()
	if err != nil {
		return err
	}
	var rr ringResult
	if callsOut != "" {
		rr.calls = map[callKey][]time.Duration{}
	}
	var recs []ringRec
	for _, r := range l.rings {
		recs = append(recs, r.recs...)
	}
	st.match(recs, clients, t0.UnixNano(), t1.Add(-2*time.Second).UnixNano(), &rr)
	h := &rr.latency
	q := func(x float64) float64 { return float64(h.Quantile(x).Microseconds()) / 1000 }
	res.Ring = &ringJSON{h.Count(), q(0.5), q(0.9), q(0.99), float64(h.Max().Microseconds()) / 1000, rr.unmatched, rr.expected, max(rr.expected-rr.seen, 0)}
	fmt.Printf("%s: call placed -> ringing on screen ms (%d samples): p50 %.2f p90 %.2f p99 %.2f max %.2f; %d of %d expected not seen, %d unmatched\n",
		res.Label, h.Count(), res.Ring.P50, res.Ring.P90, res.Ring.P99, res.Ring.Max, res.Ring.Missing, rr.expected, rr.unmatched)
	if callsOut == "" {
		return nil
	}
	f, err = os.Create(callsOut)
	if err != nil {
		return err
	}
	if err := rr.writeCalls(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// barrier writes ready (when set) and waits for goFile to exist (when
// set), at most 10 minutes.
func barrier(ready, goFile string) error {
	if ready != "" {
		if err := os.WriteFile(ready, []byte("ready\n"), 0o644); err != nil {
			return err
		}
	}
	if goFile == "" {
		return nil
	}
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(goFile); err == nil {
			return nil
		}
	}
	return errors.New("-go: " + goFile + " did not appear in 10 minutes")
}
