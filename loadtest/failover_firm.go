package loadtest

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// FailoverFirm is what the run's sampler found: every 50 ms, each
// WebSocket client that is connected and whose last pbxStatus said live
// is compared with pbxsim's channels; a firm mismatch is an extension it
// shows in a call that pbxsim ended more than Grace before (a ghost), or
// not in a call pbxsim has had up for more than Grace (missing). Each
// (client, extension, call) counts once however long it lasts. Where
// the judgement after each kill looks once the edges say live again,
// this looks all the time: at a leader's or a NATS server's death,
// before anything says stale.
type FailoverFirm struct {
	Samples    int `json:"samples"`    // client samples taken while live
	Mismatches int `json:"mismatches"` // distinct firm mismatches while live
	// After counts them by the kind of the kill they came after (bridge,
	// nats, edge, partition; "" before the first).
	After map[string]int `json:"after"`
	First []string       `json:"first,omitempty"`
}

// firmWatch is the sampler's state.
type firmWatch struct {
	mu    sync.Mutex
	rep   FailoverFirm
	seen  map[string]bool
	kind  string    // the run's last kill's kind
	event string    // the run's last kill: what a mismatch came after
	at    time.Time // and when
}

// mark notes a kill (kind, its number) as what comes next follows.
func (f *firmWatch) mark(kind string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kind, f.event, f.at = kind, fmt.Sprintf("%s kill %d", kind, n), time.Now()
}

// watchFirm samples until ctx ends (see FailoverFirm).
func (r *failRun) watchFirm(ctx context.Context) {
	f := &r.firm
	f.seen, f.rep.After = map[string]bool{}, map[string]int{}
	for ctx.Err() == nil {
		for _, c := range r.clients {
			shown, live := c.view.liveShown()
			if !live {
				continue
			}
			at := time.Now()
			g, m := r.truth.judge(shown, at, r.cfg.Grace)
			f.mu.Lock()
			f.rep.Samples++
			note := func(what string, k callKey) {
				key := c.name() + " " + what + " " + k.exten + " " + k.since.String()
				if f.seen[key] {
					return
				}
				f.seen[key] = true
				f.rep.Mismatches++
				f.rep.After[f.kind]++
				if len(f.rep.First) < 10 {
					after := "before any kill"
					if f.event != "" {
						after = fmt.Sprintf("%s after %s", fmtDur(at.Sub(f.at)), f.event)
					}
					f.rep.First = append(f.rep.First, fmt.Sprintf("%s: %s %s (pbxsim since %s), %s", c.name(), what, k.exten, k.since.Format("15:04:05.000"), after))
				}
			}
			for _, k := range g {
				note("ghost", k)
			}
			for _, k := range m {
				note("missing", k)
			}
			f.mu.Unlock()
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// liveShown is what the view shows in a call and whether its last
// pbxStatus said live, read together; not live while disconnected.
func (v *wsView) liveShown() (map[string]bool, bool) {
	select {
	case <-v.closed():
		return nil, false
	default:
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.states) == 0 || v.states[len(v.states)-1].state != "live" {
		return nil, false
	}
	out := map[string]bool{}
	for x, in := range v.inCall {
		if in {
			out[x] = true
		}
	}
	return out, true
}

// firmChecks reports the sampler's count.
func (r *failRun) firmChecks(rep *FailoverReport) {
	f := &r.firm
	f.mu.Lock()
	defer f.mu.Unlock()
	rep.Firm = f.rep
	rep.check("failover", "firm mismatches while live (every client, sampled every 50 ms)",
		fmt.Sprintf("%d in %d samples (after leader kills %d, NATS kills %d, edge kills %d, partitions %d)", f.rep.Mismatches, f.rep.Samples,
			f.rep.After[killBridge], f.rep.After[killNATS], f.rep.After[killEdge], f.rep.After[killCut]),
		"0", f.rep.Mismatches == 0 && f.rep.Samples > 0, true)
	for _, s := range f.rep.First {
		rep.note("firm mismatch while live: %s", s)
	}
}
