package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// SynthConfig is one `loadtest synth` run: a SynthAMI holding Calls
// calls up between its extensions and starting Rate new ones a second
// (SynthTraffic), a bridge following it, Clients WebSocket screens and
// REST reads.
type SynthConfig struct {
	AMI   *SynthAMI
	HTTP  string // the bridge's REST root
	Admin string // the bridge's admin root, for /metrics
	Token string
	// BridgePID, when set, is the bridge's process: the report gives its
	// peak RSS (else this process's, a bridge in it).
	BridgePID int
	SynthTraffic

	Clients  int           // WebSocket screens
	RESTRate float64       // REST reads of every extension a second (negative: none)
	Settle   time.Duration // after the last hangup, before looking for ghosts
	Progress func(Second)
}

// SynthTraffic is the calls of a synth run or ServeSynth: how many are
// held up, how fast new ones start, and their mix (synthpbx.Mix; the
// shares not given are plain internal calls).
type SynthTraffic struct {
	Calls    int           // calls held up (concurrency): CheckSynth
	Rate     float64       // new calls a second in the steady phase; each lasts Calls/Rate seconds
	Ring     time.Duration // how long a callee rings before it answers
	Duration time.Duration // the steady phase

	QueueShare    float64 // of the new calls: outside callers into a queue (SynthPBX.Queues > 0)
	TrunkShare    float64 // trunk calls, half inbound to an extension, half outbound
	TransferShare float64 // internal calls transferred, half blind, half attended
	ForwardShare  float64 // outside callers to an extension forwarded to an outside number (both legs on the trunk)
}

func (t *SynthTraffic) setDefaults() {
	if t.Calls <= 0 {
		t.Calls = 100
	}
	if t.Rate <= 0 {
		t.Rate = 10
	}
	if t.Ring <= 0 {
		t.Ring = time.Second
	}
	if t.Duration <= 0 {
		t.Duration = 10 * time.Second
	}
}

func (cfg *SynthConfig) setDefaults() {
	cfg.SynthTraffic.setDefaults()
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

// RunSynth fills the PBX with cfg.Calls answered calls as fast as the
// bridge takes them (the fill: events applied per second end to end,
// AMI reading included), then for cfg.Duration ends and starts calls at
// cfg.Rate, each ringing cfg.Ring, keeping about cfg.Calls up. It
// measures, for the steady phase's internal calls, the callee's ringing
// event sent to the callee shown ringing on every screen (the main
// latency) and the answer sent to the call shown connected, REST read
// latency, and from the bridge's /metrics the engine's cost: apply time
// per event, publish time per batch, events per batch, the share of a
// core it took, and the largest batch lag sampled. At the end it hangs up
// every call and counts the screens and REST still showing one (ghosts).
func RunSynth(ctx context.Context, cfg SynthConfig) (*Report, error) {
	cfg.setDefaults()
	g, err := newSynthGen(cfg.AMI, cfg.SynthTraffic)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hold := g.mix.Hold
	e2e := E2EConfig{HTTP: cfg.HTTP, Token: cfg.Token, Clients: cfg.Clients}
	total := cfg.Duration + hold + cfg.Settle + 10*time.Second + 2*time.Minute // bounded: the fill and the hangups come first
	ws, err := startScreens(ctx, e2e, total)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

	rep := &Report{Mode: "synth", Target: fmt.Sprintf("synthetic AMI %s, bridge %s", cfg.AMI.Addr(), cfg.HTTP),
		Connections: cfg.Clients, Rate: cfg.Rate, Latency: &Histogram{}, Errors: map[string]uint64{},
		FirstErrors: map[string]string{}, Counters: map[string]uint64{"extensions": uint64(cfg.AMI.cfg.Extensions)}}

	m1, err := g.measuredFill(ctx, cfg, rep)
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
	g.steady(ctx, cfg.SynthTraffic, start)
	steady := time.Since(start)
	m2, err := waitApplied(ctx, cfg.Admin, m1, cfg.AMI.Events()-ev1)
	if err != nil {
		return nil, err
	}
	restRep := stopREST()
	stopLag()
	rep.Counters["batch_lag_max_sampled_us"] = uint64(<-lagDone * 1e6)
	// The bridge's peak, at one collector setting against another (GOGC,
	// which its process inherits), is what the setting costs in memory.
	proc := "self"
	if cfg.BridgePID > 0 {
		proc = strconv.Itoa(cfg.BridgePID)
	}
	rep.Counters["process_peak_rss_kb"] = procStatusBytes(proc, "VmHWM:") >> 10
	rep.Counters["events_per_s_offered"] = uint64(float64(cfg.AMI.Events()-ev1) / steady.Seconds())
	engineCounters(rep, "", m1, m2, steady)
	g.counters(rep)
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

// synthGen places the calls of a run (a synthpbx.Gen on the SynthAMI's
// PBX, under its lock) and records the steady phase's internal calls for
// matchCalls.
type synthGen struct {
	ami     *SynthAMI
	gen     *synthpbx.Gen
	mix     synthpbx.Mix
	rate    float64
	recs    []callRecord
	measure bool                          // the steady phase: record its internal calls
	stamp   func(callee int, t time.Time) // ServeSynth's: called just before a measured call is dialled
}

// CheckSynth says whether a PBX of size can hold tr's calls (with its
// defaults), as RunSynth and ServeSynth check them: for a caller to fail
// before it starts a bridge.
func CheckSynth(size SynthPBX, tr SynthTraffic) error {
	tr.setDefaults()
	if err := tr.mix().Check(); err != nil {
		return fmt.Errorf("loadtest: synth: %w", err)
	}
	return checkRoom(size, tr)
}

// checkRoom says whether a PBX of size has the extensions tr's calls
// need: the calls that are no queue call need two extensions each that
// are no queue's members (a trunk call or a forward one, a transfer a
// third for a while: two is the bound that holds), the queue calls a
// member each.
func checkRoom(size SynthPBX, tr SynthTraffic) error {
	free := size.Extensions - size.Queues*size.Members
	if need := int(math.Ceil(2*float64(tr.Calls)*(1-tr.QueueShare))) + 2; need > free {
		return fmt.Errorf("loadtest: synth: %d calls need %d extensions that are no queue's members, have %d (%d extensions, %d queues of %d members)",
			tr.Calls, need, free, size.Extensions, size.Queues, size.Members)
	}
	if need := int(math.Ceil(float64(tr.Calls) * tr.QueueShare)); need > size.Queues*size.Members {
		return fmt.Errorf("loadtest: synth: %.0f%% of %d calls into queues need %d members, have %d queues of %d", tr.QueueShare*100, tr.Calls, need, size.Queues, size.Members)
	}
	return nil
}

// mix is tr's synthpbx.Mix: each call lasts Calls/Rate seconds.
func (tr SynthTraffic) mix() synthpbx.Mix {
	hold := time.Duration(float64(tr.Calls) / tr.Rate * float64(time.Second))
	return synthpbx.Mix{Queue: tr.QueueShare, Trunk: tr.TrunkShare, Transfer: tr.TransferShare, Forward: tr.ForwardShare, Hold: hold, Ring: tr.Ring}
}

// newSynthGen makes the generator of tr's calls (its defaults filled by
// the caller, once) on a's PBX, checking tr once: its mix in
// synthpbx.NewGen, then the room for its calls.
func newSynthGen(a *SynthAMI, tr SynthTraffic) (*synthGen, error) {
	g := &synthGen{ami: a, rate: tr.Rate, mix: tr.mix()}
	var err error
	a.do(func(p *synthpbx.PBX) { g.gen, err = synthpbx.NewGen(p, g.mix, uint64(time.Now().UnixNano())) })
	if err != nil {
		return nil, fmt.Errorf("loadtest: synth: %w", err)
	}
	if err := checkRoom(a.cfg, tr); err != nil {
		return nil, err
	}
	g.gen.Before = func(c *synthpbx.Call) {
		if !g.measure || c.Kind != synthpbx.Internal {
			return
		}
		if g.stamp != nil {
			g.stamp(c.B, time.Now())
		}
		c.Tag = len(g.recs)
		g.recs = append(g.recs, callRecord{caller: synthpbx.Exten(c.A), callee: synthpbx.Exten(c.B), invite: time.Now()})
	}
	g.gen.Answered = func(c *synthpbx.Call) {
		if c.Tag >= 0 && g.recs[c.Tag].ok.IsZero() {
			g.recs[c.Tag].ok = time.Now()
		}
	}
	g.gen.Ended = func(c *synthpbx.Call) {
		if c.Tag >= 0 {
			g.recs[c.Tag].end = time.Now()
		}
	}
	return g, nil
}

// fill places the calls held up at once, answered, their hangups spread
// over one call length (so the steady phase starts in its steady
// state); it returns how many it placed and the events they took.
func (g *synthGen) fill(calls int) (placed int, events uint64) {
	t0 := time.Now()
	g.ami.do(func(p *synthpbx.PBX) {
		ev0 := p.Events()
		for i := range calls {
			if g.gen.Fill(t0, t0.Add(g.mix.Hold*time.Duration(i+1)/time.Duration(calls))) != nil {
				placed++
			}
		}
		events = p.Events() - ev0
	})
	return placed, events
}

// measuredFill fills, waits until the bridge has read the fill and
// counts what that cost; it returns the scrape that ends it.
func (g *synthGen) measuredFill(ctx context.Context, cfg SynthConfig, rep *Report) (metrics, error) {
	m0, err := scrapeMetrics(ctx, cfg.Admin)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	placed, n := g.fill(cfg.Calls)
	m1, err := waitApplied(ctx, cfg.Admin, m0, n)
	if err != nil {
		return nil, err
	}
	d := time.Since(t0)
	rep.Counters["fill_calls"] = uint64(placed)
	rep.Counters["fill_events"] = n
	rep.Counters["fill_events_per_s"] = uint64(float64(n) / d.Seconds())
	engineCounters(rep, "fill_", m0, m1, d)
	return m1, nil
}

// steady ends and starts calls for tr.Duration, recording the internal
// ones.
func (g *synthGen) steady(ctx context.Context, tr SynthTraffic, start time.Time) {
	g.measure = true
	defer func() { g.measure = false }()
	every := time.Duration(float64(time.Second) / g.rate)
	next := start
	end := start.Add(tr.Duration)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		now := time.Now()
		var wake time.Time
		g.ami.do(func(*synthpbx.PBX) {
			g.gen.Due(now)
			if now.Before(end) {
				for !next.After(now) {
					next = next.Add(every)
					g.gen.Start(now)
				}
			}
			wake = g.gen.Next()
		})
		if !now.Before(end) {
			return
		}
		if wake.IsZero() || next.Before(wake) {
			wake = next
		}
		if end.Before(wake) {
			wake = end
		}
		t.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hangupAll ends every call still up (unanswered ones: the run does not
// measure them).
func (g *synthGen) hangupAll() {
	g.ami.do(func(*synthpbx.PBX) { g.gen.HangupAll() })
	kept := g.recs[:0]
	for _, r := range g.recs {
		if !r.ok.IsZero() {
			kept = append(kept, r)
		}
	}
	g.recs = kept
}

// counters adds what the generator placed to rep.
func (g *synthGen) counters(rep *Report) {
	g.ami.do(func(*synthpbx.PBX) {
		rep.Counters["calls_up_max"] = uint64(g.gen.MaxUp)
		rep.Counters["calls_skipped_no_free_extension"] = uint64(g.gen.Skipped)
		for k, n := range g.gen.Placed {
			rep.Counters["calls_placed_"+synthpbx.Kind(k).String()] = uint64(n)
		}
	})
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

// rssOf says whose peak RSS process_peak_rss_kb is.
func rssOf(cfg SynthConfig) string {
	if cfg.BridgePID > 0 {
		return "the bridge process's"
	}
	return "this process's (bridge, PBX and screens)"
}

func synthNotes(rep *Report, cfg SynthConfig, hold time.Duration) []string {
	c := rep.Counters
	notes := []string{
		fmt.Sprintf("%d extensions, %d calls up (at most %d), %.0f new calls/s lasting %v (ringing %v): %d events/s offered",
			cfg.AMI.cfg.Extensions, cfg.Calls, c["calls_up_max"], cfg.Rate, hold.Round(time.Millisecond), cfg.Ring, c["events_per_s_offered"]),
		fmt.Sprintf("mix: %d queues of %d members; of the new calls %.0f%% into a queue, %.0f%% on the trunk, %.0f%% transferred, %.0f%% forwarded to the trunk; placed %d internal, %d trunk in, %d trunk out, %d queue, %d blind and %d attended transfers, %d forwarded; %d skipped (no idle extension or member)",
			cfg.AMI.cfg.Queues, cfg.AMI.cfg.Members, cfg.QueueShare*100, cfg.TrunkShare*100, cfg.TransferShare*100, cfg.ForwardShare*100,
			c["calls_placed_internal"], c["calls_placed_trunk_in"], c["calls_placed_trunk_out"], c["calls_placed_queue"],
			c["calls_placed_blind_transfer"], c["calls_placed_attended_transfer"], c["calls_placed_forward"], c["calls_skipped_no_free_extension"]),
		fmt.Sprintf("fill: %d events (%d calls) applied at %d events/s end to end; engine %d ns/event, %d events/batch",
			c["fill_events"], c["fill_calls"], c["fill_events_per_s"], c["fill_engine_ns_per_event"], c["fill_events_per_batch"]),
		fmt.Sprintf("steady: apply %d ns/event, publish %d µs/batch of %d events, %.1f%% of a core; largest batch lag sampled %d µs; %s peak RSS %d MB",
			c["apply_ns_per_event"], c["publish_us_per_batch"], c["events_per_batch"], float64(c["engine_core_permille"])/10, c["batch_lag_max_sampled_us"],
			rssOf(cfg), c["process_peak_rss_kb"]>>10),
	}
	if rep.MachineCPU >= 0.9 {
		notes = append(notes, fmt.Sprintf("the machine's CPUs were %.0f%% busy: the synthetic PBX, the bridge and the clients competed for them", rep.MachineCPU*100))
	}
	return notes
}
