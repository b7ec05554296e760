package loadtest

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// FailoverKill is what one SIGKILL of the leading bridge led to. The
// durations are from the kill; -1 when it did not happen within
// FailoverConfig.KillTimeout.
type FailoverKill struct {
	N      int       `json:"n"`
	At     time.Time `json:"at"`
	Killed string    `json:"killed"`     // the leader killed
	Leader string    `json:"new_leader"` // who took the lease
	// CallsUp is pbxsim's channels at the kill: calls that end while
	// nobody follows the PBX are what a takeover could leave as ghosts.
	CallsUp int `json:"calls_up"`
	// Lease: the lease held by another bridge (when JetStream stored
	// the KV bucket's change, read by a NATS client of the run's own).
	Lease time.Duration `json:"lease_ns"`
	// Stalled: every edge's WebSocket client told the state is not live
	// (FirstStale says which state came first; stalled when a watcher's
	// marker came before the new leader's down).
	Stalled    time.Duration `json:"stalled_ns"`
	FirstStale []string      `json:"first_stale"` // per edge
	// Live: every edge's WebSocket client told live again.
	Live time.Duration `json:"live_ns"`
	// LiveBeforeLease counts the edges that said live again before the
	// lease was taken: stale state shown as live.
	LiveBeforeLease int `json:"live_before_lease"`
	// Ghosts and Missing are what the edges' REST reads and WebSocket
	// clients (the resumed one included) showed once live again, judged
	// against pbxsim's channels: an extension in a call that pbxsim had
	// ended Grace before, or one in a call since Grace before that they
	// did not show. The *Stuck ones were still wrong a second look later;
	// the others were late.
	Ghosts       int      `json:"ghosts"`
	GhostsStuck  int      `json:"ghosts_stuck"`
	Missing      int      `json:"missing"`
	MissingStuck int      `json:"missing_stuck"`
	Wrong        []string `json:"wrong,omitempty"` // the stuck ones, "source: exten"
	// Resume: how the client that left an edge at the kill was answered
	// on the other edge when it subscribed with its seq and epoch
	// (resumed, snapshot, or the error).
	Resume   string `json:"resume"`
	ResumeOn string `json:"resume_on"`
}

// killLoop kills the leader cfg.Kills times, measuring each takeover.
func (r *failRun) killLoop(ctx context.Context) {
	for i := 1; i <= r.cfg.Kills && ctx.Err() == nil; i++ {
		if err := r.steady(ctx); err != nil {
			r.cfg.Log.Error("failover: no steady state before a kill", "kill", i, "err", err)
			r.kills = append(r.kills, FailoverKill{N: i, Lease: -1, Stalled: -1, Live: -1, Resume: "not killed: " + err.Error()})
			return
		}
		k := r.killOnce(ctx, i)
		r.cfg.Log.Info("failover: kill", "n", i, "killed", k.Killed, "leader", k.Leader, "lease", fmtDur(k.Lease),
			"stalled", fmtDur(k.Stalled), "live", fmtDur(k.Live), "ghosts_stuck", k.GhostsStuck, "resume", k.Resume)
		r.kills = append(r.kills, k)
		if k.Live < 0 {
			return // no takeover: the next kill would measure nothing
		}
	}
}

// steady waits until both bridges are ready (the killed one restarted as
// a standby), a bridge holds the lease, every edge is live, then lets
// calls run for cfg.Settle and until pbxsim has calls up (so that some
// end during the takeover).
func (r *failRun) steady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := r.lease.holder() != "" && r.bridge(r.lease.holder()) != nil
		for _, b := range r.bridges {
			ok = ok && b.proc.ready(ctx)
		}
		for _, e := range r.edges {
			ok = ok && e.view.current() == "live"
		}
		if ok {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after 60 s: lease held by %q, edges %v", r.lease.holder(), r.edgeStates())
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	sleepCtx(ctx, r.cfg.Settle)
	for len(r.sc.pbx.pbx.Channels()) == 0 {
		if time.Now().After(deadline.Add(r.cfg.Settle)) || ctx.Err() != nil {
			return fmt.Errorf("no call up on pbxsim after 60 s (SIPp: %v)", r.callsError())
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return ctx.Err()
}

func (r *failRun) edgeStates() []string {
	var out []string
	for _, e := range r.edges {
		out = append(out, e.name+" "+e.view.current())
	}
	return out
}

// killOnce kills the leader with SIGKILL and measures: the lease taken,
// every edge stale then live again, the state judged then, the resume
// on another edge.
func (r *failRun) killOnce(ctx context.Context, n int) FailoverKill {
	k := FailoverKill{N: n, Killed: r.lease.holder(), Lease: -1, Stalled: -1, Live: -1}
	leader := r.bridge(k.Killed)
	r.resume.close() // the client leaves at the kill, with its seq
	k.CallsUp = len(r.sc.pbx.pbx.Channels())
	t0 := time.Now()
	k.At = t0
	if !leader.proc.kill9() {
		k.Resume = "not killed: " + k.Killed + " was not running"
		return k
	}
	// The supervisor starts the killed bridge again after RestartDelay:
	// before then only another bridge can take the lease.
	restarted := t0.Add(r.cfg.RestartDelay)
	var liveAll time.Time
	for deadline := t0.Add(r.cfg.KillTimeout); time.Now().Before(deadline) && ctx.Err() == nil; sleepCtx(ctx, 20*time.Millisecond) {
		got := r.lease.takenAfter(t0, k.Killed, restarted)
		if k.Lease < 0 && got.holder != "" {
			k.Lease, k.Leader = got.at.Sub(t0), got.holder
		}
		stale, live, all := time.Time{}, time.Time{}, true
		k.FirstStale = k.FirstStale[:0]
		for _, e := range r.edges {
			s, l := e.view.staleThenLive(t0)
			k.FirstStale = append(k.FirstStale, s.state)
			if s.at.IsZero() || l.IsZero() {
				all = false
			}
			if s.at.After(stale) {
				stale = s.at
			}
			if l.After(live) {
				live = l
			}
		}
		if k.Stalled < 0 && !stale.IsZero() && !slices.Contains(k.FirstStale, "") {
			k.Stalled = stale.Sub(t0)
		}
		if all && k.Lease >= 0 {
			k.Live, liveAll = live.Sub(t0), live
			break
		}
	}
	if k.Live < 0 {
		k.Resume = "no takeover"
		return k
	}
	for _, e := range r.edges {
		if _, l := e.view.staleThenLive(t0); l.Before(t0.Add(k.Lease)) {
			k.LiveBeforeLease++
		}
	}
	sleepCtx(ctx, time.Until(liveAll.Add(r.cfg.Grace)))
	r.moveResume(ctx, &k)
	r.judge(ctx, &k)
	return k
}

// moveResume subscribes the resume client on the next edge with the seq
// and epoch it had when it left.
func (r *failRun) moveResume(ctx context.Context, k *FailoverKill) {
	r.onEdge = (r.onEdge + 1) % len(r.edges)
	e := r.edges[r.onEdge]
	k.ResumeOn = e.name
	if err := r.resume.connect(ctx, e.proc.http, e.token, true); err != nil {
		k.Resume = err.Error()
		return
	}
	_, k.Resume = r.resume.position()
	// The missed changes come after the answer: give them the grace.
	sleepCtx(ctx, r.cfg.Grace)
	if s := r.resume.current(); s != "live" {
		k.Resume += " (then " + s + ", not live)"
	}
}

// judge compares every edge's REST and WebSocket state, and the resumed
// client's, with pbxsim's truth; what is wrong is looked at again after
// Grace, and what is still wrong then is stuck.
func (r *failRun) judge(ctx context.Context, k *FailoverKill) {
	type source struct {
		name  string
		shown func() (map[string]bool, error)
	}
	var srcs []source
	client := httpClient(false)
	for _, e := range r.edges {
		srcs = append(srcs, source{e.name + " REST", func() (map[string]bool, error) {
			v, err := sampleBridge(ctx, client, e.proc.http, e.token)
			return v.busy, err
		}}, source{e.name + " WebSocket", func() (map[string]bool, error) { return e.view.shown(), nil }})
	}
	srcs = append(srcs, source{"resumed client", func() (map[string]bool, error) { return r.resume.shown(), nil }})
	look := func(s source) (ghosts, missing map[callKey]bool) {
		ghosts, missing = map[callKey]bool{}, map[callKey]bool{}
		at := time.Now()
		shown, err := s.shown()
		if err != nil {
			k.Wrong = append(k.Wrong, s.name+": "+err.Error())
			return
		}
		g, m := r.truth.judge(shown, at, r.cfg.Grace)
		for _, c := range g {
			ghosts[c] = true
		}
		for _, c := range m {
			missing[c] = true
		}
		return
	}
	first := make([][2]map[callKey]bool, len(srcs))
	again := false
	for i, s := range srcs {
		g, m := look(s)
		first[i] = [2]map[callKey]bool{g, m}
		k.Ghosts += len(g)
		k.Missing += len(m)
		again = again || len(g)+len(m) > 0
	}
	if !again {
		return
	}
	sleepCtx(ctx, r.cfg.Grace)
	wrong := func(format string, args ...any) {
		if len(k.Wrong) < 10 { // the first few say enough
			k.Wrong = append(k.Wrong, fmt.Sprintf(format, args...))
		}
	}
	for i, s := range srcs {
		g, m := look(s)
		for c := range g {
			if first[i][0][c] {
				k.GhostsStuck++
				wrong("%s: ghost %s (ended on pbxsim %s)", s.name, c.exten, c.since.Format("15:04:05.000"))
			}
		}
		for c := range m {
			if first[i][1][c] {
				k.MissingStuck++
				wrong("%s: missing %s (in a call on pbxsim since %s)", s.name, c.exten, c.since.Format("15:04:05.000"))
			}
		}
	}
}
