package loadtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest/netns"
	"github.com/ctibridge/ctibridge/sipp"
)

// The link targets: a half-open link is marked stale within 3 s
// and the bridge is live again within 6 s. The suite holds every fault
// kind to them.
const (
	targetStale     = 3 * time.Second
	targetReconnect = 6 * time.Second
)

// chaosSample is one REST sample of the bridge judged against pbxsim.
type chaosSample struct {
	at              time.Time // when it was asked
	ok              bool      // answered 200
	stale           bool
	ghosts, missing []callKey
}

// amiRun is the state of the ami scenario.
type amiRun struct {
	cfg   ChaosConfig
	pbx   *chaosPBX
	proxy *amiProxy
	serve *serveProc
	ns    *netns.NS // the partition fault's, between the proxy and pbxsim
	truth *truth
	token string
	fast  atomic.Bool // sample every 20 ms (during a fault)

	mu      sync.Mutex // guards samples
	samples []chaosSample
}

// faultResult is one injected fault: when, and when the bridge marked its
// state stale and was live again (-1: never).
type faultResult struct {
	kind        string
	t0          time.Time
	stale, live time.Duration
	cut         bool // the suite ended it after FaultMax
}

// runChaosAMI places calls through the proxy-watched link, injects the
// faults in turn, and judges the bridge's REST state against pbxsim's
// channels all along.
func runChaosAMI(ctx context.Context, cfg ChaosConfig, dir string, rep *ChaosReport) error {
	ctx, sc, err := newChaosScene(ctx, cfg)
	if err != nil {
		return err
	}
	defer sc.close()
	pbx := sc.pbx
	upstream := pbx.pbx.AMIAddr()
	ns, err := partitionable(&cfg, rep)
	if err != nil {
		return err
	}
	if ns != nil {
		defer ns.Close()
		if upstream, err = ns.Through(upstream); err != nil {
			return err
		}
	}
	proxy, err := newAMIProxy(upstream)
	if err != nil {
		return err
	}
	sc.wg.Go(func() { proxy.Run(ctx) })
	srv, err := sc.serve(ctx, cfg, dir, proxy.Addr())
	if err != nil {
		return err
	}
	r := &amiRun{cfg: cfg, pbx: pbx, proxy: proxy, serve: srv, ns: ns, truth: newTruth(pbx.busy)}
	if r.token, err = srv.login(ctx); err != nil {
		return err
	}
	sc.wg.Go(func() { r.truth.run(ctx) })
	sc.wg.Go(func() { r.sample(ctx) })

	warm := min(2*time.Second, cfg.AMIDuration/2)
	var res sipp.Result
	var callErr error
	callsDone := make(chan struct{})
	go func() {
		defer close(callsDone)
		res, callErr = pbx.calls(ctx, cfg, cfg.AMIDuration+warm)
	}()
	sleepCtx(ctx, warm)
	var faults []faultResult
	// Until AMIDuration is over, and each fault at least once.
	for start, i := time.Now(), 0; (time.Since(start) < cfg.AMIDuration || i < len(cfg.Faults)) && ctx.Err() == nil; i++ {
		f := r.inject(ctx, cfg.Faults[i%len(cfg.Faults)])
		faults = append(faults, f)
		cfg.Log.Info("chaos fault", "kind", f.kind, "stale_after", f.stale, "live_after", f.live, "cut", f.cut)
		sleepCtx(ctx, cfg.Settle)
	}
	<-callsDone
	if callErr != nil {
		return callErr
	}
	r.finish(ctx, rep, faults, res)
	return ctx.Err()
}

// sample reads the bridge's state every SampleEvery (every 20 ms during
// a fault) until ctx ends.
func (r *amiRun) sample(ctx context.Context) {
	client := httpClient(false)
	for ctx.Err() == nil {
		at := time.Now()
		v, err := sampleBridge(ctx, client, r.serve.httpURL(), r.token)
		s := chaosSample{at: at, ok: err == nil, stale: v.stale}
		if err == nil && !v.stale {
			s.ghosts, s.missing = r.truth.judge(v.busy, at, r.cfg.Grace)
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		every := r.cfg.SampleEvery
		if r.fast.Load() {
			every = 20 * time.Millisecond
		}
		sleepCtx(ctx, time.Until(at.Add(every)))
	}
}

// firstAfter returns the time of the first sample asked after t for which
// pred holds, or the zero time.
func (r *amiRun) firstAfter(t time.Time, pred func(chaosSample) bool) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.samples), func(i int) bool { return !r.samples[i].at.Before(t) })
	for _, s := range r.samples[i:] {
		if pred(s) {
			return s.at
		}
	}
	return time.Time{}
}

// inject starts one fault on the live link and waits until the bridge
// has marked its state stale and is live again, cutting the link when it
// has not noticed after FaultMax. Stale is the first stale sample, or,
// when the stale spell fell between two samples, the moment the bridge
// closed the faulted connection; live again is the first live sample
// after the bridge opened a new connection.
func (r *amiRun) inject(ctx context.Context, kind string) faultResult {
	r.fast.Store(true)
	defer r.fast.Store(false)
	f := faultResult{kind: kind, stale: -1, live: -1}
	f.t0 = time.Now()
	cut := kind == faultPartition
	if cut {
		if err := r.ns.Down(); err != nil {
			r.cfg.Log.Error("chaos fault: cannot take the namespace's link down", "err", err)
			cut = false
		}
	} else if r.proxy.Fault(kind) == 0 {
		r.cfg.Log.Warn("chaos fault: no live AMI connection to inject into", "kind", kind)
	}
	var staleAt, closedAt, liveAt, healedAt time.Time
	for ctx.Err() == nil && liveAt.IsZero() && time.Since(f.t0) < r.cfg.FaultMax+time.Minute {
		sleepCtx(ctx, 20*time.Millisecond)
		if cut && (!staleAt.IsZero() || !closedAt.IsZero() || time.Since(f.t0) > r.cfg.FaultMax) {
			// Noticed (or given up on): the partition heals, and the
			// bridge's next login gets through.
			f.cut = staleAt.IsZero() && closedAt.IsZero()
			if err := r.ns.Up(); err != nil {
				r.cfg.Log.Error("chaos fault: cannot bring the namespace's link up", "err", err)
			}
			cut, healedAt = false, time.Now()
		}
		if staleAt.IsZero() {
			staleAt = r.firstAfter(f.t0, func(s chaosSample) bool { return s.ok && s.stale })
		}
		if closedAt.IsZero() {
			closedAt = r.proxy.FirstClose(f.t0)
		}
		if staleAt.IsZero() && closedAt.IsZero() && !f.cut && kind != faultPartition && time.Since(f.t0) > r.cfg.FaultMax {
			f.cut = true
			r.proxy.Cut()
		}
		if reopened := r.proxy.FirstAccept(f.t0); !reopened.IsZero() {
			liveAt = r.firstAfter(reopened, func(s chaosSample) bool { return s.ok && !s.stale })
		} else if !healedAt.IsZero() {
			// A link the bridge kept across the partition comes back by
			// itself (TCP retransmits what was dropped).
			liveAt = r.firstAfter(healedAt, func(s chaosSample) bool { return s.ok && !s.stale })
		}
	}
	if staleAt.IsZero() || (!closedAt.IsZero() && closedAt.Before(staleAt)) {
		staleAt = closedAt
	}
	if !staleAt.IsZero() && !f.cut {
		f.stale = staleAt.Sub(f.t0)
	}
	if !liveAt.IsZero() {
		f.live = liveAt.Sub(f.t0)
	}
	return f
}

// finish waits for the last calls to show as ended, takes the final
// sample, and writes the checks and counters.
func (r *amiRun) finish(ctx context.Context, rep *ChaosReport, faults []faultResult, res sipp.Result) {
	const sc = "ami"
	// Convergence: live, and every call ended on pbxsim shown ended.
	final := -1
	liveWait := time.Now()
	for time.Since(liveWait) < 30*time.Second && ctx.Err() == nil {
		sleepCtx(ctx, r.cfg.Grace+r.cfg.SampleEvery)
		v, err := sampleBridge(ctx, httpClient(false), r.serve.httpURL(), r.token)
		if err == nil && !v.stale {
			final = len(v.busy)
			if final == 0 {
				break
			}
		}
	}
	rep.check(sc, "live at the end, no ghost call", ghostsValue(final), "live, 0", final == 0, true)
	crashes, first := r.serve.crashes()
	rep.check(sc, "serve crashes (panic, fatal error, race)", fmt.Sprint(crashes), "0", crashes == 0, true)
	if first != "" {
		rep.note("ami: serve crashed: %s", first)
	}
	r.faultChecks(rep, faults)
	r.truthChecks(rep, faults)
	rep.count(sc, "calls_successful", float64(res.Successful))
	rep.count(sc, "calls_failed", float64(res.Failed))
	rep.count(sc, "ami_connections", float64(r.proxy.Accepted()))
	rep.count(sc, "pbxsim_channels_at_end", float64(len(r.pbx.pbx.Channels())))
}

func ghostsValue(final int) string {
	if final < 0 {
		return "never live"
	}
	return fmt.Sprintf("live, %d", final)
}

// faultChecks reports, per fault kind, the worst time to stale and to
// live again against the targets.
func (r *amiRun) faultChecks(rep *ChaosReport, faults []faultResult) {
	for _, kind := range r.cfg.Faults {
		n, cut := 0, 0
		worstStale, worstLive := time.Duration(0), time.Duration(0)
		never := false
		for _, f := range faults {
			if f.kind != kind {
				continue
			}
			n++
			if f.cut {
				cut++
			}
			if f.live < 0 {
				never = true
			}
			worstStale, worstLive = max(worstStale, f.stale), max(worstLive, f.live)
		}
		if n == 0 {
			continue
		}
		rep.count("ami", "faults_"+kind, float64(n))
		rep.count("ami", "faults_"+kind+"_cut_by_suite", float64(cut))
		staleV, liveV := fmtDur(worstStale), fmtDur(worstLive)
		if cut > 0 {
			staleV = fmt.Sprintf("> %s (%d of %d cut)", fmtDur(r.cfg.FaultMax), cut, n)
		}
		if never {
			liveV = "never"
		}
		rep.check("ami", kind+": time to stale (worst of "+fmt.Sprint(n)+")", staleV, "≤ "+fmtDur(targetStale),
			cut == 0 && !never && worstStale <= targetStale, false)
		rep.check("ami", kind+": time to live again (worst)", liveV, "≤ "+fmtDur(targetReconnect),
			cut == 0 && !never && worstLive <= targetReconnect, false)
	}
}

// truthChecks counts the samples that lied (shown live, yet wrong):
// while a fault was not yet noticed, and after the bridge was live again.
func (r *amiRun) truthChecks(rep *ChaosReport, faults []faultResult) {
	r.mu.Lock()
	samples := r.samples
	r.mu.Unlock()
	during := func(at time.Time) bool {
		for _, f := range faults {
			end := f.t0.Add(max(f.stale, f.live, 0))
			if f.stale < 0 || f.live < 0 {
				end = f.t0.Add(r.cfg.FaultMax + time.Minute)
			}
			if !at.Before(f.t0) && at.Before(end) {
				return true
			}
		}
		return false
	}
	type tally struct{ ghosts, missing map[callKey]bool }
	newTally := func() tally { return tally{map[callKey]bool{}, map[callKey]bool{}} }
	inFault, steady := newTally(), newTally()
	var live, stale, failed int
	for _, s := range samples {
		switch {
		case !s.ok:
			failed++
			continue
		case s.stale:
			stale++
			continue
		}
		live++
		t, isSteady := steady, true
		if during(s.at) {
			t, isSteady = inFault, false
		}
		for _, k := range s.ghosts {
			if isSteady && !t.ghosts[k] && len(t.ghosts) < 3 {
				rep.note("ami: ghost call after resync: %s shown in a call at %s, ended on pbxsim at %s", k.exten,
					s.at.Format("15:04:05.000"), k.since.Format("15:04:05.000"))
			}
			t.ghosts[k] = true
		}
		for _, k := range s.missing {
			if isSteady && !t.missing[k] && len(t.missing) < 3 {
				rep.note("ami: missing call after resync: %s not shown in a call at %s, in one on pbxsim since %s", k.exten,
					s.at.Format("15:04:05.000"), k.since.Format("15:04:05.000"))
			}
			t.missing[k] = true
		}
	}
	rep.count("ami", "samples_live", float64(live))
	rep.count("ami", "samples_stale", float64(stale))
	rep.count("ami", "samples_failed", float64(failed))
	rep.count("ami", "ghost_calls_shown_live_during_faults", float64(len(inFault.ghosts)))
	rep.count("ami", "missing_calls_shown_live_during_faults", float64(len(inFault.missing)))
	rep.check("ami", "ghost calls outside faults (after resync)", fmt.Sprint(len(steady.ghosts)), "0", len(steady.ghosts) == 0, false)
	rep.check("ami", "missing calls outside faults (after resync)", fmt.Sprint(len(steady.missing)), "0", len(steady.missing) == 0, false)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// partitionable makes the partition fault's namespace when cfg.Faults
// has it; where none can be made (not root) it drops the fault from
// cfg.Faults with a note in rep.
func partitionable(cfg *ChaosConfig, rep *ChaosReport) (*netns.NS, error) {
	if !slices.Contains(cfg.Faults, faultPartition) {
		return nil, nil
	}
	ns, err := netns.New()
	if errors.Is(err, netns.ErrUnavailable) {
		rep.note("ami: the partition fault is skipped: %v", err)
		cfg.Faults = slices.DeleteFunc(slices.Clone(cfg.Faults), func(f string) bool { return f == faultPartition })
		return nil, nil
	}
	return ns, err
}
