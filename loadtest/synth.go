package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SynthConfig is one `loadtest synth` run: a SynthAMI holding Calls
// two-party calls up between its extensions and starting Rate new ones a
// second, a bridge following it, Clients WebSocket screens and REST reads.
type SynthConfig struct {
	AMI   *SynthAMI
	HTTP  string // the bridge's REST root
	Admin string // the bridge's admin root, for /metrics
	Token string

	Calls    int           // calls held up (concurrency); 2*Calls+2 <= the extensions
	Rate     float64       // new calls a second in the steady phase; each lasts Calls/Rate seconds
	Ring     time.Duration // how long a callee rings before it answers
	Duration time.Duration // the steady phase
	Clients  int           // WebSocket screens
	RESTRate float64       // REST reads of every extension a second (negative: none)
	Settle   time.Duration // after the last hangup, before looking for ghosts
	Progress func(Second)
}

func (cfg *SynthConfig) setDefaults() {
	if cfg.Calls <= 0 {
		cfg.Calls = 100
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 10
	}
	if cfg.Ring <= 0 {
		cfg.Ring = time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 5
	}
	if cfg.RESTRate == 0 {
		cfg.RESTRate = 5
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
}

// synthCall is a call of the run and its record for matchCalls.
type synthCall struct {
	c          *SynthCall
	rec        int       // index in recs; -1 for the calls of the fill
	answer, up time.Time // when it is answered, hung up
}

// RunSynth fills the PBX with cfg.Calls answered calls as fast as the
// bridge takes them (the fill: events applied per second end to end,
// AMI reading included), then for cfg.Duration ends and starts calls at
// cfg.Rate, each ringing cfg.Ring, keeping about cfg.Calls up. It
// measures, for the steady phase's calls, the callee's ringing event
// sent to the callee shown ringing on every screen (the main latency) and
// the answer sent to the call shown connected, REST read latency, and
// from the bridge's /metrics the engine's cost: apply time per event,
// publish time per batch, events per batch, the share of a core it took,
// and the largest batch lag sampled. At the end it hangs up every call
// and counts the screens and REST still showing one (ghosts).
func RunSynth(ctx context.Context, cfg SynthConfig) (*Report, error) {
	cfg.setDefaults()
	if 2*cfg.Calls+2 > cfg.AMI.exts {
		return nil, fmt.Errorf("loadtest: synth: %d calls need %d extensions, have %d", cfg.Calls, 2*cfg.Calls+2, cfg.AMI.exts)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hold := time.Duration(float64(cfg.Calls) / cfg.Rate * float64(time.Second))
	if hold <= cfg.Ring {
		return nil, fmt.Errorf("loadtest: synth: %d calls at %.0f/s last %v, not longer than the ring time %v", cfg.Calls, cfg.Rate, hold, cfg.Ring)
	}
	e2e := E2EConfig{HTTP: cfg.HTTP, Token: cfg.Token, Clients: cfg.Clients}
	total := cfg.Duration + hold + cfg.Settle + 10*time.Second + 2*time.Minute // bounded: the fill and the hangups come first
	ws, err := startScreens(ctx, e2e, total)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

	rep := &Report{Mode: "synth", Target: fmt.Sprintf("synthetic AMI %s, bridge %s", cfg.AMI.Addr(), cfg.HTTP),
		Connections: cfg.Clients, Rate: cfg.Rate, Latency: &Histogram{}, Errors: map[string]uint64{},
		FirstErrors: map[string]string{}, Counters: map[string]uint64{"extensions": uint64(cfg.AMI.exts)}}
	g := &synthGen{ami: cfg.AMI, free: make([]int, cfg.AMI.exts)}
	for i := range g.free {
		g.free[i] = i
	}

	m1, err := g.fill(ctx, cfg, rep, hold)
	if err != nil {
		return nil, err
	}

	// The steady phase, with REST reads and lag sampling.
	stopREST := startRESTReads(ctx, cfg.HTTP, cfg.Token, cfg.RESTRate, cfg.Duration)
	defer stopREST()
	lagCtx, stopLag := context.WithCancel(ctx)
	defer stopLag()
	lagDone := make(chan float64, 1)
	go func() { lagDone <- sampleLag(lagCtx, cfg.Admin) }()
	start := time.Now()
	cpu0, mach0 := cpuTime(), machineCPU()
	rep.Started = start
	ev1 := cfg.AMI.Events()
	g.steady(ctx, cfg, start, hold)
	steady := time.Since(start)
	m2, err := waitApplied(ctx, cfg.Admin, m1, cfg.AMI.Events()-ev1)
	if err != nil {
		return nil, err
	}
	restRep := stopREST()
	stopLag()
	rep.Counters["batch_lag_max_sampled_us"] = uint64(<-lagDone * 1e6)
	rep.Counters["events_per_s_offered"] = uint64(float64(cfg.AMI.Events()-ev1) / steady.Seconds())
	engineCounters(rep, "", m1, m2, steady)
	rep.Counters["calls_up_max"] = uint64(g.maxUp)
	rep.Counters["calls_skipped_no_free_pair"] = uint64(g.skipped)
	rep.Elapsed = cfg.Duration
	rep.ClientCPU = (cpuTime() - cpu0).Seconds() / steady.Seconds()
	if m := machineCPU(); mach0 != nil && m != nil {
		rep.MachineCPU = m.busySince(mach0)
	}

	// Every call ends; the screens and REST must show none.
	g.hangupAll()
	rep.countGhosts(ctx, ghostCheck{settle: cfg.Settle, recheck: 10 * time.Second}, e2e, ws.screens)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	ws.stop()
	connected := &Histogram{}
	matchCalls(rep, connected, g.recs, ws.screens, e2e)
	rep.Extra = append(rep.Extra, Series{Name: "answer→connected", Latency: connected})
	rep.addClients(ws.rep, restRep)
	rep.Notes = append(rep.Notes, synthNotes(rep, cfg, hold)...)
	if cfg.Progress != nil {
		for _, s := range rep.PerSecond {
			cfg.Progress(s)
		}
	}
	return rep, nil
}

// synthGen places the calls: a FIFO of free extensions, the calls up in
// the order they end (every call lasts as long, so FIFO is time order).
type synthGen struct {
	ami     *SynthAMI
	free    []int
	up      []*synthCall // by hangup time
	ringing []*synthCall // by answer time
	recs    []callRecord
	maxUp   int
	skipped int
	stamp   func(callee int, t time.Time) // ServeSynth's: called just before a measured call is dialled
}

// dial starts a call between the two longest-free extensions; rec says
// whether the run measures it.
func (g *synthGen) dial(rec int) *synthCall {
	a, b := g.free[0], g.free[1]
	g.free = g.free[2:]
	if rec >= 0 && g.stamp != nil {
		g.stamp(b, time.Now())
	}
	c := &synthCall{c: g.ami.Dial(a, b), rec: -1}
	if rec >= 0 {
		c.rec = len(g.recs)
		g.recs = append(g.recs, callRecord{caller: SynthExten(a), callee: SynthExten(b), invite: time.Now()})
	}
	g.up = append(g.up, c)
	g.maxUp = max(g.maxUp, len(g.up))
	return c
}

// fill dials and answers cfg.Calls calls at once, their hangups spread
// over one call length (so the steady phase starts in its steady state),
// waits until the bridge has read them and counts what that cost; it
// returns the scrape that ends it.
func (g *synthGen) fill(ctx context.Context, cfg SynthConfig, rep *Report, hold time.Duration) (metrics, error) {
	m0, err := scrapeMetrics(ctx, cfg.Admin)
	if err != nil {
		return nil, err
	}
	t0, ev0 := time.Now(), cfg.AMI.Events()
	for i := range cfg.Calls {
		c := g.dial(-1)
		cfg.AMI.Answer(c.c)
		c.up = t0.Add(hold * time.Duration(i+1) / time.Duration(cfg.Calls))
	}
	n := cfg.AMI.Events() - ev0
	m1, err := waitApplied(ctx, cfg.Admin, m0, n)
	if err != nil {
		return nil, err
	}
	d := time.Since(t0)
	rep.Counters["fill_calls"] = uint64(cfg.Calls)
	rep.Counters["fill_events"] = n
	rep.Counters["fill_events_per_s"] = uint64(float64(n) / d.Seconds())
	engineCounters(rep, "fill_", m0, m1, d)
	return m1, nil
}

// steady ends and starts calls for cfg.Duration.
func (g *synthGen) steady(ctx context.Context, cfg SynthConfig, start time.Time, hold time.Duration) {
	every := time.Duration(float64(time.Second) / cfg.Rate)
	next := start
	end := start.Add(cfg.Duration)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		now := time.Now()
		for len(g.ringing) > 0 && !g.ringing[0].answer.After(now) {
			c := g.ringing[0]
			g.ringing = g.ringing[1:]
			g.ami.Answer(c.c)
			g.recs[c.rec].ok = time.Now()
		}
		for len(g.up) > 0 && !g.up[0].up.After(now) {
			g.hangup(g.up[0])
			g.up = g.up[1:]
		}
		if !now.Before(end) {
			return
		}
		for !next.After(now) {
			next = next.Add(every)
			if len(g.free) < 2 {
				g.skipped++
				continue
			}
			c := g.dial(0)
			c.answer, c.up = now.Add(cfg.Ring), now.Add(hold)
			g.ringing = append(g.ringing, c)
		}
		wake := next
		if end.Before(wake) {
			wake = end
		}
		if len(g.ringing) > 0 && g.ringing[0].answer.Before(wake) {
			wake = g.ringing[0].answer
		}
		if len(g.up) > 0 && g.up[0].up.Before(wake) {
			wake = g.up[0].up
		}
		t.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *synthGen) hangup(c *synthCall) {
	g.ami.Hangup(c.c)
	if c.rec >= 0 {
		g.recs[c.rec].end = time.Now()
	}
	g.free = append(g.free, c.c.A, c.c.B)
}

// hangupAll ends every call still up, ringing ones first (unanswered:
// the run does not measure them).
func (g *synthGen) hangupAll() {
	for _, c := range g.ringing {
		c.rec = -1
	}
	g.ringing = nil
	for _, c := range g.up {
		g.hangup(c)
	}
	g.up = nil
	kept := g.recs[:0]
	for _, r := range g.recs {
		if !r.ok.IsZero() {
			kept = append(kept, r)
		}
	}
	g.recs = kept
}

// metrics is a scrape of the bridge's /metrics: value by series.
type metrics map[string]float64

func scrapeMetrics(ctx context.Context, admin string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(admin, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := httpClient(false).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("loadtest: GET %s/metrics: HTTP %d", admin, res.StatusCode)
	}
	m := metrics{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "ctibridge_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil && i > 0 {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// waitApplied waits until the bridge has read n more AMI frames than at
// from (applied and published at most one batch later: the engine takes
// a batch as the reader hands it over), and returns the scrape that saw
// it.
func waitApplied(ctx context.Context, admin string, from metrics, n uint64) (metrics, error) {
	want := from["ctibridge_ami_messages_total"] + float64(n)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := scrapeMetrics(ctx, admin)
		if err != nil {
			return nil, err
		}
		if m["ctibridge_ami_messages_total"] >= want {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("loadtest: synth: the bridge did not read the events within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// engineCounters adds the engine's cost between two scrapes.
func engineCounters(rep *Report, prefix string, a, b metrics, d time.Duration) {
	const apply, publish = `ctibridge_engine_seconds_total{step="apply"}`, `ctibridge_engine_seconds_total{step="publish"}`
	msgs := b["ctibridge_ami_messages_total"] - a["ctibridge_ami_messages_total"]
	batches := b["ctibridge_engine_batches_total"] - a["ctibridge_engine_batches_total"]
	ap, pub := b[apply]-a[apply], b[publish]-a[publish]
	rep.Counters[prefix+"events_applied"] = uint64(msgs)
	if msgs > 0 {
		rep.Counters[prefix+"apply_ns_per_event"] = uint64(ap / msgs * 1e9)
		rep.Counters[prefix+"engine_ns_per_event"] = uint64((ap + pub) / msgs * 1e9)
	}
	if batches > 0 {
		rep.Counters[prefix+"publish_us_per_batch"] = uint64(pub / batches * 1e6)
		rep.Counters[prefix+"events_per_batch"] = uint64(msgs / batches)
	}
	rep.Counters[prefix+"engine_core_permille"] = uint64((ap + pub) / d.Seconds() * 1000)
}

// sampleLag reads the last batch's lag every 100 ms until ctx ends and
// returns the largest, in seconds.
func sampleLag(ctx context.Context, admin string) float64 {
	var worst float64
	for {
		if m, err := scrapeMetrics(ctx, admin); err == nil {
			worst = max(worst, m["ctibridge_engine_batch_seconds"])
		}
		select {
		case <-ctx.Done():
			return worst
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func synthNotes(rep *Report, cfg SynthConfig, hold time.Duration) []string {
	c := rep.Counters
	notes := []string{
		fmt.Sprintf("%d extensions, %d calls up (at most %d), %.0f new calls/s lasting %v (ringing %v): %d events/s offered",
			cfg.AMI.exts, cfg.Calls, c["calls_up_max"], cfg.Rate, hold.Round(time.Millisecond), cfg.Ring, c["events_per_s_offered"]),
		fmt.Sprintf("fill: %d events (%d calls) applied at %d events/s end to end; engine %d ns/event, %d events/batch",
			c["fill_events"], c["fill_calls"], c["fill_events_per_s"], c["fill_engine_ns_per_event"], c["fill_events_per_batch"]),
		fmt.Sprintf("steady: apply %d ns/event, publish %d µs/batch of %d events, %.1f%% of a core; largest batch lag sampled %d µs",
			c["apply_ns_per_event"], c["publish_us_per_batch"], c["events_per_batch"], float64(c["engine_core_permille"])/10, c["batch_lag_max_sampled_us"]),
	}
	if rep.MachineCPU >= 0.9 {
		notes = append(notes, fmt.Sprintf("the machine's CPUs were %.0f%% busy: the synthetic PBX, the bridge and the clients competed for them", rep.MachineCPU*100))
	}
	return notes
}
