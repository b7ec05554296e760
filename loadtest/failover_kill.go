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
	// EdgeLive: each edge's client told live again (Live is the last).
	EdgeLive []time.Duration `json:"edge_live_ns"`
	// Where the time went, from the nodes' logs (millisecond stamps; -1
	// when not logged): Won, the new leader read the lease as its own;
	// Leading, it had caught up and stored its lead record; Resynced, its
	// link's resync was published (live, stored in the stream); EdgeLed,
	// each edge applied the lead record.
	Won      time.Duration   `json:"won_ns"`
	Leading  time.Duration   `json:"leading_ns"`
	Resynced time.Duration   `json:"resynced_ns"`
	EdgeLed  []time.Duration `json:"edge_led_ns"`
	// The state once live again: judged.
	judged
	// Resume: how the client that left an edge at the kill was answered
	// on the other edge when it subscribed with its seq and epoch
	// (resumed, snapshot, or the error).
	Resume   string `json:"resume"`
	ResumeOn string `json:"resume_on"`
}

// judged is what every edge's REST reads and WebSocket clients (the
// admin's, the limited users', the resumed one) showed, against
// pbxsim's channels: an extension in a call that pbxsim had ended Grace
// before (a ghost), or one in a call since Grace before that they did not
// show (missing). The *Stuck ones were still wrong a second look later
// from a source that said live then (stale state shown as live); the
// others were late, or said stale (StuckStale). Limited counts the stuck ones in limited users'
// clients.
type judged struct {
	Ghosts       int `json:"ghosts"`
	GhostsStuck  int `json:"ghosts_stuck"`
	Missing      int `json:"missing"`
	MissingStuck int `json:"missing_stuck"`
	Limited      int `json:"limited_stuck"`
	// StuckStale: wrong at both looks too, from a source that said its
	// state was stale at the second (a node that cannot hear its stream
	// says so: not stale state shown as live, so not stuck above).
	StuckStale int      `json:"stuck_stale"`
	Wrong      []string `json:"wrong,omitempty"` // the stuck ones, "source: exten"
}

// Kinds of kill in a run's plan.
const (
	killBridge = "bridge"
	killNATS   = "nats"
	killEdge   = "edge"
	killCut    = "partition" // the leader cut off from NATS
)

// plan is the order of the run's kills: the leader's, with the NATS
// servers' and the edges' (alternating) spread evenly between them.
func (c *FailoverConfig) plan() []string {
	var extras []string
	for i := range max(c.NATSKills, c.EdgeKills, c.Partitions) {
		if i < c.NATSKills {
			extras = append(extras, killNATS)
		}
		if i < c.EdgeKills {
			extras = append(extras, killEdge)
		}
		if i < c.Partitions {
			extras = append(extras, killCut)
		}
	}
	var out []string
	next := 0
	for i := 1; i <= c.Kills; i++ {
		out = append(out, killBridge)
		// Extra j goes after leader kill ceil((j+1)*Kills/(extras+1)).
		for next < len(extras) && (next+1)*c.Kills <= i*(len(extras)+1) {
			out = append(out, extras[next])
			next++
		}
	}
	return append(out, extras[next:]...)
}

// killLoop runs the plan: the leader killed cfg.Kills times, the NATS
// servers and the edges between, each from a steady state.
func (r *failRun) killLoop(ctx context.Context) {
	for _, kind := range r.cfg.plan() {
		if ctx.Err() != nil {
			return
		}
		if kind == killCut && r.nets == nil {
			continue // no namespace (the report says why)
		}
		if err := r.steady(ctx); err != nil {
			r.cfg.Log.Error("failover: no steady state before a kill", "kind", kind, "err", err)
			switch kind {
			case killBridge:
				r.kills = append(r.kills, FailoverKill{N: len(r.kills) + 1, Lease: -1, Stalled: -1, Live: -1, Resume: "not killed: " + err.Error()})
			case killNATS:
				r.natsK = append(r.natsK, FailoverNATSKill{N: len(r.natsK) + 1, Shown: -1, Error: "not killed: " + err.Error()})
			case killEdge:
				r.edgeK = append(r.edgeK, FailoverEdgeKill{N: len(r.edgeK) + 1, Back: -1, Error: "not killed: " + err.Error()})
			case killCut:
				r.parts = append(r.parts, FailoverPartition{N: len(r.parts) + 1, StepDown: -1, Lease: -1, Opened: -1, Live: -1, Rejoined: -1,
					Error: "not cut: " + err.Error()})
			}
			return
		}
		r.firm.mark(kind, map[string]int{killNATS: len(r.natsK), killEdge: len(r.edgeK), killBridge: len(r.kills), killCut: len(r.parts)}[kind]+1)
		switch kind {
		case killCut:
			p := r.partitionOnce(ctx, len(r.parts)+1)
			r.cfg.Log.Info("failover: leader cut off from NATS", "n", p.N, "cut", p.Cut, "leader", p.Leader, "step_down", fmtDur(p.StepDown),
				"lease", fmtDur(p.Lease), "opened", fmtDur(p.Opened), "live", fmtDur(p.Live), "asked", p.Asked, "accepted", p.Accepted,
				"refused", p.Refused, "not_leader", p.NotLeader, "rejoined", fmtDur(p.Rejoined), "err", p.Error)
			r.parts = append(r.parts, p)
		case killNATS:
			k := r.killNATS(ctx, len(r.natsK)+1)
			r.cfg.Log.Info("failover: NATS server killed", "n", k.N, "server", k.Server, "shown", fmtDur(k.Shown), "not_live", k.NotLive,
				"leader", k.LeaderBefore+" -> "+k.LeaderAfter, "ghosts_stuck", k.GhostsStuck, "missing_stuck", k.MissingStuck, "err", k.Error)
			r.natsK = append(r.natsK, k)
		case killEdge:
			k := r.killEdge(ctx, len(r.edgeK)+1)
			r.cfg.Log.Info("failover: edge killed", "n", k.N, "edge", k.Edge, "clients", k.Clients, "resumed", k.Resumed, "lost", k.Lost,
				"back", fmtDur(k.Back), "ghosts_stuck", k.GhostsStuck, "err", k.Error)
			r.edgeK = append(r.edgeK, k)
		default:
			k := r.killOnce(ctx, len(r.kills)+1)
			r.cfg.Log.Info("failover: kill", "n", k.N, "killed", k.Killed, "leader", k.Leader, "lease", fmtDur(k.Lease),
				"won", fmtDur(k.Won), "leading", fmtDur(k.Leading), "resynced", fmtDur(k.Resynced),
				"stalled", fmtDur(k.Stalled), "live", fmtDur(k.Live), "ghosts_stuck", k.GhostsStuck, "resume", k.Resume)
			r.kills = append(r.kills, k)
			if k.Live < 0 {
				return // no takeover: the next kill would measure nothing
			}
		}
	}
}

// steady waits until the run is settled (the killed bridge restarted as
// a standby, the edges live and in step: settled), then lets calls run
// for cfg.Settle and until pbxsim has calls up (so that some end during
// the takeover).
func (r *failRun) steady(ctx context.Context) error {
	if err := r.settled(ctx); err != nil {
		return err
	}
	sleepCtx(ctx, r.cfg.Settle)
	for deadline := time.Now().Add(60 * time.Second); len(r.sc.pbx.pbx.Channels()) == 0; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no call up on pbxsim after 60 s (SIPp: %v)", r.callsError())
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return ctx.Err()
}

// settled waits, 60 s at most, until both bridges are ready, a bridge
// holds the lease (the run's watch caught up), every client is live and
// the edges are in step.
func (r *failRun) settled(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := r.lease.holder() != "" && r.bridge(r.lease.holder()) != nil
		for _, b := range r.bridges {
			ok = ok && b.proc.ready(ctx)
		}
		for _, c := range r.clients {
			ok = ok && c.view.current() == "live"
		}
		if ok && r.lease.caughtUp(ctx) && r.inStep(ctx, time.Second) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after 60 s: lease held by %q, clients %v", r.lease.holder(), r.edgeStates())
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func (r *failRun) edgeStates() []string {
	var out []string
	for _, c := range r.clients {
		out = append(out, c.name()+" "+c.view.current())
	}
	return out
}

// killOnce kills the leader with SIGKILL and measures: the lease taken,
// every edge stale then live again, the state judged then, the resume
// on another edge.
func (r *failRun) killOnce(ctx context.Context, n int) FailoverKill {
	k := FailoverKill{N: n, Killed: r.lease.holder(), Lease: -1, Stalled: -1, Live: -1, Won: -1, Leading: -1, Resynced: -1}
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
	for _, c := range r.clients {
		if s, l := c.view.staleThenLive(t0); !l.IsZero() && l.Before(t0.Add(k.Lease)) {
			k.LiveBeforeLease++
			k.Wrong = append(k.Wrong, fmt.Sprintf("%s: live %s after the kill (%s at %s), the lease at %s", c.name(),
				fmtDur(l.Sub(t0)), s.state, fmtDur(s.at.Sub(t0)), fmtDur(k.Lease)))
		}
	}
	for _, e := range r.edges {
		_, l := e.view.staleThenLive(t0)
		k.EdgeLive = append(k.EdgeLive, l.Sub(t0))
	}
	sleepCtx(ctx, time.Until(liveAll.Add(r.cfg.Grace)))
	r.moveResume(ctx, &k)
	early := k.Wrong
	k.judged = r.judge(ctx, nil)
	k.Wrong = append(early, k.Wrong...)
	r.phases(&k, t0)
	return k
}

// moveResume subscribes the resume client on the next edge with the seq
// and epoch it had when it left.
func (r *failRun) moveResume(ctx context.Context, k *FailoverKill) {
	r.onEdge = (r.onEdge + 1) % len(r.edges)
	e := r.edges[r.onEdge]
	k.ResumeOn = e.name
	if err := r.resume.connect(ctx, e.proc.httpURL(), e.token(), true); err != nil {
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

// judge compares every edge's REST and every WebSocket client's state
// (the resumed client's too) with pbxsim's truth; what is wrong is looked
// at again after Grace, and what is still wrong then is stuck. down, when
// set, is an edge that is not running: its REST is not read.
func (r *failRun) judge(ctx context.Context, down *failNode) judged {
	type source struct {
		name    string
		limited bool
		// shown is what the source shows and whether it says live.
		shown func() (map[string]bool, bool, error)
	}
	var j judged
	var srcs []source
	client := httpClient(false)
	for _, e := range r.edges {
		if e == down {
			continue
		}
		srcs = append(srcs, source{e.name + " REST", false, func() (map[string]bool, bool, error) {
			v, err := sampleBridge(ctx, client, e.proc.httpURL(), e.token())
			return v.busy, !v.stale, err
		}})
	}
	for _, c := range r.clients {
		srcs = append(srcs, source{c.name(), c.user != "admin", viewShown(c.view)})
	}
	srcs = append(srcs, source{"resumed client", false, viewShown(r.resume)})
	look := func(s source) (ghosts, missing map[callKey]bool, live bool) {
		ghosts, missing = map[callKey]bool{}, map[callKey]bool{}
		at := time.Now()
		shown, live, err := s.shown()
		if err != nil {
			j.Wrong = append(j.Wrong, s.name+": "+err.Error())
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
		g, m, _ := look(s)
		first[i] = [2]map[callKey]bool{g, m}
		j.Ghosts += len(g)
		j.Missing += len(m)
		again = again || len(g)+len(m) > 0
	}
	if !again {
		return j
	}
	sleepCtx(ctx, r.cfg.Grace)
	wrong := func(format string, args ...any) {
		if len(j.Wrong) < 10 { // the first few say enough
			j.Wrong = append(j.Wrong, fmt.Sprintf(format, args...))
		}
	}
	for i, s := range srcs {
		g, m, live := look(s)
		if !live {
			for c := range g {
				j.StuckStale += b2i(first[i][0][c])
			}
			for c := range m {
				j.StuckStale += b2i(first[i][1][c])
			}
			continue
		}
		for c := range g {
			if first[i][0][c] {
				j.GhostsStuck++
				j.Limited += b2i(s.limited)
				wrong("%s: ghost %s (ended on pbxsim %s)", s.name, c.exten, c.since.Format("15:04:05.000"))
			}
		}
		for c := range m {
			if first[i][1][c] {
				j.MissingStuck++
				j.Limited += b2i(s.limited)
				wrong("%s: missing %s (in a call on pbxsim since %s)", s.name, c.exten, c.since.Format("15:04:05.000"))
			}
		}
	}
	return j
}

// viewShown is a WebSocket view as a judged source: what it shows, and
// whether its last pbxStatus said live.
func viewShown(v *wsView) func() (map[string]bool, bool, error) {
	return func() (map[string]bool, bool, error) { return v.shown(), v.current() == "live", nil }
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
