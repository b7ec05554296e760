package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/pbxsim"
	"github.com/ctibridge/ctibridge/sipp"
)

// E2EConfig is one end-to-end run: SIP calls through a PBX (pbxsim or a
// real Asterisk) watched by a ctibridge, whose WebSocket clients must show
// every call ringing and connected.
type E2EConfig struct {
	// SIPAddr is the PBX's SIP address (UDP), host:port. Required.
	SIPAddr string
	// HTTP is the bridge's REST root ("http://127.0.0.1:8080"); /ws is
	// under it. Required.
	HTTP string
	// Token is a login token that sees every extension (an admin's).
	Token string
	// Callers and Callees are the extensions, pair i calling
	// Callees[i] from Callers[i]; a pair places one call at a time. They
	// register without a password (pbxsim's default) or with Secret.
	Callers, Callees []string
	Secret           string
	// Dial is, by callee, the number its caller dials when it is not
	// the callee's own: a ring group or a queue whose only member it is
	// (pbxsim's freepbx plan rings it through a Local pair). The callee
	// is still the extension watched ringing and connected.
	Dial map[string]string
	// Devices are more phones to register (a callee's second device,
	// NethVoice's 9X<exten>): they ring with their user and never
	// answer.
	Devices []string
	// Rate is calls placed per second. Default 10.
	Rate float64
	// Duration is how long calls are placed. Default 10 s.
	Duration time.Duration
	// Ring is how long a callee rings before answering; Talk how long a
	// call lasts once answered. Defaults 100 ms and 1 s.
	Ring, Talk time.Duration
	// Clients is the number of WebSocket clients watching. Default 5.
	Clients int
	// RESTRate is GET /astproxy/extensions per second during the run
	// (open loop, over 2 connections). Default 20; negative: none.
	RESTRate float64
	// Generator places the calls: "sipp" (SIPp's register_invite_client
	// scenario, timed from its message trace), "phones" (built-in sipgo
	// phones) or "" for sipp when the binary is found, phones otherwise.
	Generator string
	// SIPpBinary overrides "sipp" from PATH.
	SIPpBinary string
	// PBXChannels, when set, lists the PBX's live channels (the truth):
	// before looking for ghost calls the run waits up to Drain (default
	// 15 s) for the PBX to have none, and an extension the PBX still has a
	// channel for is not a ghost (it counts in pbx_busy_extensions).
	PBXChannels func() []string
	Drain       time.Duration
	// Settle is how long to wait after the last call (and the PBX's
	// drain) for the screens to show it ended before looking for ghost
	// calls. Default 2 s.
	Settle time.Duration
	// Recheck is how much longer to wait, when ghosts were found, before
	// counting them again, to tell those shown late from those stuck.
	// Default 10 s; negative: no recount.
	Recheck time.Duration
	// Admin, when set, is the bridge's admin listener
	// ("http://127.0.0.1:9090"): the report gives what its WebSocket hub
	// wrote while the calls were placed (ws_messages_sent, ws_writes,
	// ws_bytes_sent, ws_coalesced, from /metrics) and that per call and
	// screen.
	Admin string
	// BridgePID, when set, is the bridge's process, a child or an
	// --attach target on this machine: the report gives its CPU while the
	// calls were placed.
	BridgePID int
	// Log receives progress. Default: discard.
	Log *slog.Logger
	// Progress, when set, is called once a second with the calls answered
	// and the ringing latencies of that second.
	Progress func(Second)
}

// callRecord is one call as the generator saw it.
type callRecord struct {
	caller, callee string
	invite         time.Time // INVITE sent
	ok             time.Time // 200 OK received; zero when not answered
	end            time.Time // BYE sent (or failure)
	err            error
	hangupFailed   bool // the BYE got no answer in time: the PBX may keep the call
}

// RunE2E places calls and measures, for each, INVITE sent to the callee's
// extenUpdate showing "ringing" on every WebSocket client (the main
// latency), and 200 OK received to the callee showing a connected
// conversation (0 when the screen showed it first), plus REST read
// latency during the run. A call answered that some client never saw
// ringing or connected counts in calls_missing; an extension still busy
// on a client or in REST once every call has ended counts in ghost_calls.
func RunE2E(ctx context.Context, cfg E2EConfig) (*Report, error) {
	cfg.setDefaults()
	gen, notes, err := cfg.generator()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	phones, err := startE2EPhones(ctx, cfg, gen == "phones")
	if err != nil {
		return nil, err
	}
	defer phones.stop()

	total := cfg.Duration + cfg.Ring + cfg.Talk + cfg.Drain + cfg.Settle + cfg.Recheck + 15*time.Second // bounded: the calls end first
	ws, err := startScreens(ctx, cfg, total)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

	// REST reads during the run.
	stopREST := startRESTReads(ctx, cfg.HTTP, cfg.Token, cfg.RESTRate, total)
	defer stopREST()

	start := time.Now()
	hub0 := readHubCounters(ctx, cfg.Admin)
	cpu0, mach0, bridge0 := cpuTime(), machineCPU(), procCPU(cfg.BridgePID)
	var recs []callRecord
	var genErr error
	var sippRes sipp.Result
	if gen == "phones" {
		recs = placeWithPhones(ctx, cfg, phones.callers)
	} else {
		recs, sippRes, genErr = placeWithSIPp(ctx, cfg)
	}
	restRep := stopREST()
	elapsed, cpu1, mach1, bridge1 := time.Since(start), cpuTime(), machineCPU(), procCPU(cfg.BridgePID)
	hub1 := readHubCounters(ctx, cfg.Admin)
	if genErr != nil {
		return nil, genErr
	}

	rep := &Report{Mode: "e2e", Target: fmt.Sprintf("SIP %s, bridge %s", cfg.SIPAddr, cfg.HTTP), Connections: cfg.Clients,
		Rate: cfg.Rate, Started: start, Elapsed: min(elapsed, cfg.Duration), Latency: &Histogram{}, Notes: notes,
		Errors: map[string]uint64{}, FirstErrors: map[string]string{}, Counters: map[string]uint64{}}
	// Let the PBX end its calls and the screens catch up with the last
	// hangups, then look for ghosts: on every client and in REST.
	rep.countGhosts(ctx, ghostCheck{pbxChannels: cfg.PBXChannels, drain: cfg.Drain, settle: cfg.Settle, recheck: cfg.Recheck}, cfg, ws.screens)
	ws.stop()
	connected := &Histogram{}
	matchCalls(rep, connected, recs, ws.screens, cfg)
	for _, r := range recs {
		if r.hangupFailed {
			rep.Counters["hangups_failed"]++
		}
	}
	if gen == "sipp" {
		rep.Counters["sipp_successful"], rep.Counters["sipp_failed"] = uint64(sippRes.Successful), uint64(sippRes.Failed)
		if sippRes.Errors != "" {
			rep.Notes = append(rep.Notes, "sipp's error log begins: "+strings.TrimSpace(trunc([]byte(sippRes.Errors))))
		}
	}
	rep.Extra = append(rep.Extra, Series{Name: "200 OK→connected", Latency: connected})
	rep.addHubCounters(hub0, hub1, cfg.Clients)
	rep.Counters["screen_resyncs"] = 0
	for _, s := range ws.screens {
		s.mu.Lock()
		rep.Counters["screen_resyncs"] += uint64(s.resyncs)
		s.mu.Unlock()
	}
	rep.addClients(ws.rep, restRep)
	rep.ClientCPU = (cpu1 - cpu0).Seconds() / elapsed.Seconds()
	if mach0 != nil && mach1 != nil {
		rep.MachineCPU = mach1.busySince(mach0)
	}
	where := "this process used %.2f CPUs"
	if cfg.BridgePID > 0 && bridge0 >= 0 && bridge1 >= 0 {
		cores := (bridge1 - bridge0).Seconds() / elapsed.Seconds()
		rep.Counters["bridge_cpu_ms"] = uint64((bridge1 - bridge0).Milliseconds())
		rep.Notes = append(rep.Notes, fmt.Sprintf("the bridge process (pid %d) used %.2f CPUs while the calls were placed; the screens' and caller's process %.2f", cfg.BridgePID, cores, rep.ClientCPU))
		where = "the screens' process used %.2f CPUs, the bridge its own"
	}
	if rep.MachineCPU >= 0.9 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the machine's CPUs were %.0f%% busy: the PBX, the bridge, the phones and the clients competed for them ("+where+")", rep.MachineCPU*100, rep.ClientCPU))
	}
	if cfg.Progress != nil {
		for _, s := range rep.PerSecond {
			cfg.Progress(s)
		}
	}
	return rep, nil
}

// startRESTReads reads GET /astproxy/extensions at rate (none when not
// positive) for at most d; stop ends the reads and returns their report
// (nil without reads), and may be called again.
func startRESTReads(ctx context.Context, base, token string, rate float64, d time.Duration) (stop func() *Report) {
	ctx, cancel := context.WithCancel(ctx)
	var rep *Report
	done := make(chan struct{})
	go func() {
		defer close(done)
		if rate > 0 {
			rep, _ = RunHTTP(ctx, HTTPConfig{URL: strings.TrimSuffix(base, "/") + "/astproxy/extensions", Token: token,
				Connections: 2, Rate: rate, Duration: d})
		}
	}()
	return func() *Report {
		cancel()
		<-done
		return rep
	}
}

// placeWithPhones places calls at cfg.Rate from the built-in phones, one
// per free pair, for cfg.Duration.
func placeWithPhones(ctx context.Context, cfg E2EConfig, callers map[string]*pbxsim.Phone) []callRecord {
	free := make(chan int, len(cfg.Callers))
	for i := range cfg.Callers {
		free <- i
	}
	var mu sync.Mutex
	var recs []callRecord
	var wg sync.WaitGroup
	start := time.Now()
	n := int64(cfg.Rate * cfg.Duration.Seconds())
	for k := range n {
		due := schedule(start, cfg.Rate, 1, 0, k)
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(due)):
		}
		if ctx.Err() != nil {
			break
		}
		var pair int
		select {
		case pair = <-free:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() {
				// A short pause between calls of a pair keeps their
				// screen events apart.
				time.Sleep(100 * time.Millisecond)
				free <- pair
			}()
			rec := callRecord{caller: cfg.Callers[pair], callee: cfg.Callees[pair], invite: time.Now()}
			cctx, cc := context.WithTimeout(ctx, cfg.Ring+10*time.Second)
			call, err := callers[rec.caller].Call(cctx, cfg.dialOf(rec.callee))
			cc()
			if err != nil {
				rec.err, rec.end = err, time.Now()
			} else {
				rec.ok = time.Now()
				select {
				case <-time.After(cfg.Talk):
				case <-call.Done():
				case <-ctx.Done():
				}
				rec.end = time.Now()
				// A phone retransmits its BYE until Timer F (64*T1, 32 s):
				// one given up sooner leaves the PBX a call it never heard
				// end, as it would leave Asterisk.
				hctx, hc := context.WithTimeout(context.Background(), 32*time.Second)
				rec.hangupFailed = call.Hangup(hctx) != nil
				hc()
			}
			mu.Lock()
			recs = append(recs, rec)
			mu.Unlock()
		})
	}
	wg.Wait()
	return recs
}

// dialOf is the number dialled to reach callee (Dial).
func (cfg *E2EConfig) dialOf(callee string) string {
	if n, ok := cfg.Dial[callee]; ok {
		return n
	}
	return callee
}

// calleeOf is the callee reached by dialling n: the inverse of dialOf.
func (cfg *E2EConfig) calleeOf(n string) string {
	for callee, d := range cfg.Dial {
		if d == n {
			return callee
		}
	}
	return n
}

// earlySlack is how much earlier than the generator's INVITE stamp a
// screen update may be and still belong to the call.
const earlySlack = 20 * time.Millisecond

// ringing says whether a status shows the extension ringing.
func ringing(status string) bool { return status == "ringing" || status == "busy_ringing" }

// matchCalls finds each call on each screen: the callee's first ringing
// update after the INVITE and its first connected update after that,
// before the pair's next call. It goes screen by screen, so that only one
// screen's updates are rebuilt at a time.
func matchCalls(rep *Report, connected *Histogram, recs []callRecord, screens []*screen, cfg E2EConfig) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].invite.Before(recs[j].invite) })
	// next[i] is the INVITE time of the callee's following call.
	next := make([]time.Time, len(recs))
	lastIdx := map[string]int{}
	for i := len(recs) - 1; i >= 0; i-- {
		if j, ok := lastIdx[recs[i].callee]; ok {
			next[i] = recs[j].invite
		}
		lastIdx[recs[i].callee] = i
	}
	var start time.Time
	if len(recs) > 0 {
		start = recs[0].invite
	}
	secs := map[int]*Histogram{}
	secCount := map[int]uint64{}
	sec := make([]int, len(recs))
	for i, c := range recs {
		if sec[i] = int(c.invite.Sub(start) / time.Second); !c.ok.IsZero() && secs[sec[i]] == nil {
			secs[sec[i]] = &Histogram{}
		}
	}
	// missed[i] counts the screens that missed call i; why[i] describes
	// the first three.
	missed := make([]int, len(recs))
	why := make([][]string, len(recs))
	for ci, s := range screens {
		view := s.byExten()
		for i, c := range recs {
			if c.ok.IsZero() {
				continue
			}
			obs := view[c.callee]
			var ringAt, connAt time.Time
			for _, o := range obs {
				// SIPp stamps its trace from a clock it refreshes once per
				// scheduling loop, so a screen can show the call up to a
				// few ms "before" the INVITE's stamp: such latencies count
				// as 0 (early, below).
				if o.at.Before(c.invite.Add(-earlySlack)) || (!next[i].IsZero() && !o.at.Before(next[i].Add(-earlySlack))) {
					continue
				}
				if ringAt.IsZero() && ringing(o.status) {
					ringAt = o.at
				}
				if connAt.IsZero() && o.connected {
					connAt = o.at
				}
			}
			if ringAt.IsZero() || connAt.IsZero() {
				if missed[i]++; missed[i] <= 3 {
					var seen []string
					for _, o := range obs {
						if d := o.at.Sub(c.invite); d > -2*time.Second && d < 5*time.Second {
							seen = append(seen, fmt.Sprintf("%+dms:%s/%d", d.Milliseconds(), o.status, o.convs))
						}
					}
					why[i] = append(why[i], fmt.Sprintf("client %d saw ringing=%v connected=%v, updates around it %v", ci, !ringAt.IsZero(), !connAt.IsZero(), seen))
				}
				continue
			}
			if ringAt.Before(c.invite) {
				rep.Counters["ringing_before_invite_stamp"]++
			}
			rep.Latency.Record(max(ringAt.Sub(c.invite), 0))
			secs[sec[i]].Record(max(ringAt.Sub(c.invite), 0))
			connected.Record(max(connAt.Sub(c.ok), 0))
		}
	}
	rep.Counters["calls_placed"] = uint64(len(recs))
	for i, c := range recs {
		if c.ok.IsZero() {
			kind := "call:" + callErrKind(c.err)
			rep.Errors[kind]++
			if _, ok := rep.FirstErrors[kind]; !ok && c.err != nil {
				rep.FirstErrors[kind] = fmt.Sprintf("%s→%s: %v", c.caller, c.callee, c.err)
			}
			rep.Counters["calls_failed"]++
			continue
		}
		rep.Requests++
		rep.Counters["calls_answered"]++
		secCount[sec[i]]++
		if missed[i] > 0 {
			rep.Counters["calls_missing"]++
			if rep.Counters["calls_missing"] <= 3 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("call missing from a screen: %s→%s, INVITE at %s, 200 OK %+dms: on %d of %d screens: %s", c.caller, c.callee,
					c.invite.Format("15:04:05.000"), c.ok.Sub(c.invite).Milliseconds(), missed[i], len(screens), strings.Join(why[i], "; ")))
			}
		}
	}
	for _, k := range []string{"calls_missing", "calls_failed"} {
		if _, ok := rep.Counters[k]; !ok {
			rep.Counters[k] = 0
		}
	}
	keys := make([]int, 0, len(secs))
	for k := range secs {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		h := secs[k]
		rep.PerSecond = append(rep.PerSecond, Second{At: time.Duration(k+1) * time.Second, Requests: secCount[k],
			P50: h.Quantile(0.5), P99: h.Quantile(0.99), Max: h.Max()})
	}
}

func callErrKind(err error) string {
	switch {
	case err == nil:
		return "not_answered"
	case errors.Is(err, pbxsim.ErrCallFailed):
		return "rejected"
	case errors.As(err, new(kindError)):
		return Kind(err)
	case errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return Kind(err)
}
