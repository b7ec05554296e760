package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// FailoverReport is what a failover run measured: each kill, the spread
// of the takeover times over the kills, and the checks (ChaosReport's,
// scenario "failover").
type FailoverReport struct {
	ChaosReport
	LeaseTTL time.Duration     `json:"lease_ttl_ns"`
	Edges    int               `json:"edges"`
	Rate     float64           `json:"calls_per_second"`
	Kills    []FailoverKill    `json:"kills"`
	Spread   map[string]Spread `json:"spread"` // lease, won, leading, resynced, stalled, live
	// NATSKills and EdgeKills: the kills of a nats-server and of an edge.
	NATSKills []FailoverNATSKill `json:"nats_kills"`
	EdgeKills []FailoverEdgeKill `json:"edge_kills"`
	// Limited is what the limited users' clients were shown over the run.
	Limited FailoverLimited `json:"limited"`
	// Partitions: the leader cut off from NATS (failover_partition.go).
	Partitions []FailoverPartition `json:"partitions"`
	// Firm: the clients sampled against pbxsim while they said live.
	Firm FailoverFirm `json:"firm"`
}

// FailoverLimited adds up what the limited users' WebSocket clients were
// shown of the conversations in the extensions' updates and snapshots
// they received: their own extensions' with the number (OwnFull) or
// without (OwnBlank), the others' with the numbers, names and channel
// names hidden (Hidden) or not (Leaked, Leaks the first few).
type FailoverLimited struct {
	Users    int      `json:"users"`
	Clients  int      `json:"clients"`
	OwnFull  int      `json:"own_full"`
	OwnBlank int      `json:"own_blank"`
	Hidden   int      `json:"hidden"`
	Leaked   int      `json:"leaked"`
	Leaks    []string `json:"leaks,omitempty"`
}

// Spread is the p50, p90, p99 and max of one measure over the kills that
// had it (nearest rank: with 20 kills the p90 is the 18th, the p99 the
// largest).
type Spread struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func spreadOf(ds []time.Duration) Spread {
	var s []time.Duration
	for _, d := range ds {
		if d >= 0 {
			s = append(s, d)
		}
	}
	if len(s) == 0 {
		return Spread{P50: -1, P90: -1, P99: -1, Max: -1}
	}
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Spread{N: len(s), P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: s[len(s)-1]}
}

func newFailoverReport(cfg FailoverConfig) *FailoverReport {
	return &FailoverReport{ChaosReport: ChaosReport{Started: time.Now(), Counters: map[string]float64{}},
		LeaseTTL: cfg.LeaseTTL, Edges: cfg.Edges, Rate: cfg.Rate, Spread: map[string]Spread{}}
}

// takeoverTarget: bridge takeover within 5 s of the
// leader's death, p99 over 20 kills.
const takeoverTarget = 5 * time.Second

// finish waits for the last calls' CDRs and fills the report.
func (r *failRun) finish(ctx context.Context, rep *FailoverReport) {
	const sc = "failover"
	rep.Kills, rep.NATSKills, rep.EdgeKills = r.kills, r.natsK, r.edgeK
	var lease, won, leading, resynced, stalled, live []time.Duration
	var takenOver, resumed, stuckGhosts, stuckMissing, liveEarly, markerFirst int
	for _, k := range r.kills {
		lease, stalled, live = append(lease, k.Lease), append(stalled, k.Stalled), append(live, k.Live)
		won, leading, resynced = append(won, k.Won), append(leading, k.Leading), append(resynced, k.Resynced)
		if k.Lease >= 0 && k.Live >= 0 {
			takenOver++
		}
		if k.Resume == "resumed" {
			resumed++
		}
		if len(k.FirstStale) > 0 && !slices.ContainsFunc(k.FirstStale, func(s string) bool { return s != "stalled" }) {
			markerFirst++
		}
		stuckGhosts += k.GhostsStuck
		stuckMissing += k.MissingStuck
		liveEarly += k.LiveBeforeLease
	}
	rep.Spread["lease"], rep.Spread["stalled"], rep.Spread["live"] = spreadOf(lease), spreadOf(stalled), spreadOf(live)
	rep.Spread["won"], rep.Spread["leading"], rep.Spread["resynced"] = spreadOf(won), spreadOf(leading), spreadOf(resynced)
	n := len(r.kills)
	rep.check(sc, "kills taken over (lease, every edge live)", fmt.Sprintf("%d of %d", takenOver, r.cfg.Kills), "all", takenOver == r.cfg.Kills, true)
	rep.check(sc, "ghost calls stuck after a takeover", fmt.Sprint(stuckGhosts), "0", stuckGhosts == 0, true)
	rep.check(sc, "calls missing (stuck) after a takeover", fmt.Sprint(stuckMissing), "0", stuckMissing == 0, true)
	rep.check(sc, "edges live again before the lease was taken", fmt.Sprint(liveEarly), "0", liveEarly == 0, true)
	rep.check(sc, "WebSocket resumed on another edge (seq/epoch)", fmt.Sprintf("%d of %d", resumed, n), "all", n > 0 && resumed == n, true)
	if r.cfg.MaxLive > 0 {
		m := rep.Spread["live"].Max
		rep.check(sc, "edges live again after a kill, max", fmtDur(m), "<= "+fmtDur(r.cfg.MaxLive), m >= 0 && m <= r.cfg.MaxLive, true)
	}
	p := rep.Spread["lease"].P99
	rep.check(sc, "takeover (lease held by the standby), p99", fmtDur(p), "<= "+fmtDur(takeoverTarget), p >= 0 && p <= takeoverTarget, false)
	p = rep.Spread["live"].P99
	rep.check(sc, "edges live again, p99", fmtDur(p), "<= "+fmtDur(takeoverTarget), p >= 0 && p <= takeoverTarget, false)
	rep.check(sc, "kills whose edges said stalled first", fmt.Sprintf("%d of %d", markerFirst, n), "all", markerFirst == n, false)
	for _, c := range r.clients {
		if err := c.view.lastErr(); err != nil {
			rep.note("%s was disconnected: %v", c.name(), err)
		}
	}
	r.partitionChecks(rep)
	r.firmChecks(rep)
	r.natsChecks(rep)
	r.edgeChecks(rep)
	r.limitedChecks(rep)
	r.cdrChecks(ctx, rep)
	r.nodeChecks(rep)
	rep.count(sc, "kills", float64(n))
	rep.note("lease TTL %v: the bus's default (serve has no setting for it); stall markers after %v of silence", r.cfg.LeaseTTL, r.cfg.LeaseTTL/2)
}

// natsChecks: while a nats-server was dead, calls kept reaching every
// edge and nothing was stuck wrong.
func (r *failRun) natsChecks(rep *FailoverReport) {
	const sc = "failover"
	if r.cfg.NATSKills == 0 {
		return
	}
	var shown []time.Duration
	stuck, after, notLive, moved, failed, apart, saidStale := 0, 0, 0, 0, 0, 0, 0
	var notLiveFor time.Duration
	for _, k := range r.natsK {
		shown = append(shown, k.Shown)
		stuck += k.GhostsStuck + k.MissingStuck
		after += k.After.GhostsStuck + k.After.MissingStuck
		saidStale += k.StuckStale + k.After.StuckStale
		if k.InStep < 0 {
			apart++
		}
		notLive += k.NotLive
		notLiveFor = max(notLiveFor, k.NotLiveFor)
		if k.Moved {
			moved++
		}
		if k.Error != "" {
			failed++
		}
	}
	rep.Spread["nats_shown"] = spreadOf(shown)
	sh := rep.Spread["nats_shown"]
	rep.check(sc, "NATS server kills with new calls shown on every edge while it was down", fmt.Sprintf("%d of %d", sh.N, r.cfg.NATSKills), "all",
		sh.N == r.cfg.NATSKills && failed == 0, true)
	rep.check(sc, "NATS server back: edges not in step within 10 s", fmt.Sprint(apart), "0", apart == 0 && len(r.natsK) > 0, true)
	// A node that cannot hear its stream says its state is stale on its
	// own (bus/unheard.go): what it shows wrong then is counted apart
	// (stuck_stale), not as stale state shown as live.
	rep.check(sc, "NATS server down: stale calls shown as live (stuck ghosts, missing)", fmt.Sprint(stuck), "0", stuck == 0 && len(r.natsK) > 0, true)
	rep.check(sc, "NATS server back: ghosts and missing calls stuck", fmt.Sprint(after), "0", after == 0 && len(r.natsK) > 0, true)
	rep.count(sc, "nats_stuck_said_stale", float64(saidStale))
	rep.check(sc, "new calls shown after a NATS server's kill, max", fmtDur(sh.Max), "<= "+fmtDur(takeoverTarget), sh.Max >= 0 && sh.Max <= takeoverTarget, false)
	// While the killed server's streams elect a leader (4 to 9 s) an edge
	// that cannot hear its stream is told stalled, as it must be; told so
	// for the whole outage, it never heard the surviving servers.
	rep.check(sc, "NATS server down: edges told not live (longest spell)", fmt.Sprintf("%d (%s)", notLive, fmtDur(notLiveFor)),
		"< "+fmtDur(r.cfg.NATSDown)+" (the outage)", notLiveFor < r.cfg.NATSDown, false)
	rep.check(sc, "NATS server kills that moved the lease", fmt.Sprintf("%d of %d", moved, len(r.natsK)), "0", moved == 0, false)
	rep.count(sc, "nats_kills", float64(len(r.natsK)))
}

// edgeChecks: an edge's clients resumed on another with their seq and
// epoch and missed no change.
func (r *failRun) edgeChecks(rep *FailoverReport) {
	const sc = "failover"
	if r.cfg.EdgeKills == 0 {
		return
	}
	clients, resumed, compared, lost, stuck, back, backMoved, backResumed, failed := 0, 0, 0, 0, 0, 0, 0, 0, 0
	for _, k := range r.edgeK {
		clients += k.Clients
		resumed += k.Resumed
		compared += k.Compared
		lost += k.Lost
		stuck += k.GhostsStuck + k.MissingStuck
		backMoved += k.BackMoved
		backResumed += k.BackResumed
		if k.Back >= 0 {
			back++
		}
		if k.Error != "" {
			failed++
		}
	}
	rep.check(sc, "edge kills: clients resumed on another edge (seq/epoch)", fmt.Sprintf("%d of %d", resumed, clients), "all",
		clients > 0 && resumed == clients && len(r.edgeK) == r.cfg.EdgeKills && failed == 0, true)
	rep.check(sc, "edge kills: changes lost (resumed vs stayed, same seq)", fmt.Sprintf("%d in %d clients", lost, compared), "0", compared > 0 && lost == 0, true)
	rep.check(sc, "edge kills: ghosts and missing calls stuck after the resume", fmt.Sprint(stuck), "0", stuck == 0, true)
	rep.check(sc, "edge kills: clients resumed back on the restarted edge", fmt.Sprintf("%d of %d", backResumed, backMoved), "all",
		backMoved > 0 && backResumed == backMoved, false)
	rep.count(sc, "edge_kills", float64(len(r.edgeK)))
	rep.count(sc, "edge_kills_back", float64(back))
}

// limitedChecks: the limited users' clients saw their own calls in full
// and nobody else's numbers or channel names (the stuck ghosts and
// missing calls of their clients are in the takeover's, NATS's and edge's
// counts, and judged.Limited).
func (r *failRun) limitedChecks(rep *FailoverReport) {
	const sc = "failover"
	l := &rep.Limited
	l.Users = len(r.users)
	stuck := 0
	for _, k := range r.kills {
		stuck += k.Limited
	}
	for _, k := range r.natsK {
		stuck += k.After.Limited
	}
	for _, k := range r.edgeK {
		stuck += k.Limited
	}
	for _, c := range r.clients {
		if c.user == "admin" {
			continue
		}
		l.Clients++
		x := c.view.leaked()
		l.OwnFull += x.ownFull
		l.OwnBlank += x.ownBlank
		l.Hidden += x.others
		l.Leaked += x.leaked
		for _, f := range x.first {
			if len(l.Leaks) < 5 {
				l.Leaks = append(l.Leaks, c.name()+": "+f)
			}
		}
	}
	if l.Clients == 0 {
		return
	}
	rep.check(sc, "limited users shown another's numbers or channel names", fmt.Sprintf("%d of %d others' conversations", l.Leaked, l.Leaked+l.Hidden), "0",
		l.Leaked == 0 && l.Hidden > 0, true)
	rep.check(sc, "limited users' own conversations shown with the number", fmt.Sprintf("%d of %d", l.OwnFull, l.OwnFull+l.OwnBlank), "all",
		l.OwnFull > 0 && l.OwnBlank == 0, true)
	rep.check(sc, "limited users' clients: ghosts and missing calls stuck", fmt.Sprint(stuck), "0", stuck == 0, true)
}

// cdrChecks waits for the calls to end and their CDRs to be stored, then
// compares the cdr table with the calls SIPp completed and the Cdr
// events pbxsim emitted.
func (r *failRun) cdrChecks(ctx context.Context, rep *FailoverReport) {
	const sc = "failover"
	for t0 := time.Now(); len(r.sc.pbx.pbx.Channels()) > 0 && time.Since(t0) < 15*time.Second; {
		sleepCtx(ctx, 100*time.Millisecond)
	}
	// The last kill may have left a takeover under way.
	if err := r.settled(ctx); err != nil {
		rep.note("failover: not steady at the end: %v", err)
	}
	r.finalGhosts(ctx, rep)
	waitCDRsStored(ctx, r.dsn)
	rows, err := cdrRows(ctx, r.dsn)
	if err != nil {
		rep.note("failover: cannot read the cdr table: %v", err)
	}
	emitted := r.wit.snapshot()
	stored, doubled, lost := 0, 0, 0
	for _, c := range rows {
		stored += c
		if c > 1 {
			doubled++
		}
	}
	for id := range emitted {
		if rows[id] == 0 {
			lost++
		}
	}
	r.callsMu.Lock()
	calls, callsErr, sippFailures := r.calls, r.callsErr, r.sippFailures
	r.callsMu.Unlock()
	if callsErr != nil {
		rep.note("failover: SIPp failed %d times; the first: %v", sippFailures, callsErr)
	}
	rep.check(sc, "CDR rows == calls completed", fmt.Sprintf("%d rows, %d calls", stored, calls.Successful), "equal, each once",
		err == nil && calls.Successful > 0 && stored == calls.Successful && len(rows) == len(emitted), true)
	rep.check(sc, "CDRs stored twice", fmt.Sprint(doubled), "0", err == nil && doubled == 0, true)
	rep.check(sc, "Cdrs pbxsim emitted, not stored (lost)", fmt.Sprintf("%d of %d", lost, len(emitted)), "0", err == nil && lost == 0, true)
	for k, v := range map[string]int{"calls_successful": calls.Successful, "calls_failed": calls.Failed, "cdr_rows": stored,
		"cdr_uniqueids": len(rows), "cdr_emitted": len(emitted), "sipp_failures": sippFailures} {
		rep.count(sc, k, float64(v))
	}
}

// finalGhosts counts, once the calls have ended and a grace later, the
// extensions the edges' REST (e2e's restGhosts) and WebSocket clients
// still show in a call that pbxsim has no channel for.
func (r *failRun) finalGhosts(ctx context.Context, rep *FailoverReport) {
	sleepCtx(ctx, r.cfg.Grace)
	busy := channelExtens(r.sc.pbx.pbx.Channels())
	ghosts := 0
	views := []*wsView{r.resume}
	for _, c := range r.clients {
		views = append(views, c.view)
	}
	for _, e := range r.edges {
		g, _, err := restGhosts(ctx, E2EConfig{HTTP: e.proc.httpURL(), Token: e.token()}, busy)
		if err != nil {
			rep.note("%s: %v", e.name, err)
		}
		if len(g) > 0 {
			rep.note("%s's REST still shows %d extensions in a call after the run, e.g. %v", e.name, len(g), g[:min(len(g), 5)])
		}
		ghosts += len(g)
	}
	for _, v := range views {
		for x := range v.shown() {
			if !busy[x] {
				ghosts++
			}
		}
	}
	rep.check("failover", "ghost calls once the calls ended", fmt.Sprint(ghosts), "0", ghosts == 0, true)
}

// nodeChecks counts the nodes' crashes and their exits other than the
// run's kills.
func (r *failRun) nodeChecks(rep *FailoverReport) {
	const sc = "failover"
	crashes, exits := 0, 0
	for _, n := range append(slices.Clone(r.bridges), r.edges...) {
		c, first := n.proc.crashes()
		crashes += c
		if first != "" {
			rep.note("%s crashed: %s", n.name, first)
		}
		starts, ex := n.proc.stats()
		exits += len(ex)
		for _, e := range ex {
			rep.note("%s exited by itself: %s", n.name, e)
		}
		rep.count(sc, n.name+"_starts", float64(starts))
	}
	rep.check(sc, "node crashes (panic, fatal error, race)", fmt.Sprint(crashes), "0", crashes == 0, true)
	rep.check(sc, "node exits other than the kills", fmt.Sprint(exits), "0", exits == 0, false)
}

// JSON is the report as indented JSON.
func (r *FailoverReport) JSON() []byte {
	b, _ := json.MarshalIndent(r, "", "  ")
	return append(b, '\n')
}

// WriteText prints the kills, the spread of their times, then the checks.
func (r *FailoverReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "failover run of %v: %d kills of the leading bridge (SIGKILL), %d of a NATS server, %d of an edge, %d partitions; lease TTL %v, %d edges, %.0f calls/s\n\n",
		r.Elapsed.Round(time.Second), len(r.Kills), len(r.NATSKills), len(r.EdgeKills), len(r.Partitions), r.LeaseTTL, r.Edges, r.Rate)
	fmt.Fprintf(w, "%-4s %-9s %-10s %-5s %-6s %-6s %-6s %-6s %-7s %-6s %-11s %-17s %-8s %s\n", "kill", "killed", "new leader", "calls",
		"lease", "won", "lead", "resync", "stalled", "live", "edges led", "first stale", "ghosts/s", "resume")
	durs := func(ds []time.Duration) string {
		var out []string
		for _, d := range ds {
			out = append(out, fmtDur(d))
		}
		return strings.Join(out, ",")
	}
	for _, k := range r.Kills {
		fmt.Fprintf(w, "%-4d %-9s %-10s %-5d %-6s %-6s %-6s %-6s %-7s %-6s %-11s %-17s %-8s %s\n", k.N, k.Killed, k.Leader, k.CallsUp,
			fmtDur(k.Lease), fmtDur(k.Won), fmtDur(k.Leading), fmtDur(k.Resynced), fmtDur(k.Stalled), fmtDur(k.Live), durs(k.EdgeLed),
			strings.Join(k.FirstStale, ","), fmt.Sprintf("%d/%d", k.Ghosts, k.GhostsStuck), k.Resume+" on "+k.ResumeOn)
		for _, x := range k.Wrong {
			fmt.Fprintf(w, "     %s\n", x)
		}
	}
	if len(r.NATSKills) > 0 {
		fmt.Fprintf(w, "\n%-4s %-7s %-5s %-7s %-17s %-9s %-13s %-8s %-8s %-12s %s\n", "nats", "server", "calls", "shown", "leader", "not live",
			"ghosts/stuck", "restart", "in step", "after g/s", "leads, error")
		for _, k := range r.NATSKills {
			fmt.Fprintf(w, "%-4d %-7s %-5d %-7s %-17s %-9s %-13s %-8s %-8s %-12s %s\n", k.N, k.Server, k.CallsUp, fmtDur(k.Shown), k.LeaderBefore+">"+k.LeaderAfter,
				fmt.Sprintf("%d %s", k.NotLive, fmtDur(k.NotLiveFor)), fmt.Sprintf("%d/%d", k.Ghosts, k.GhostsStuck+k.MissingStuck), fmtDur(k.Restart),
				fmtDur(k.InStep), fmt.Sprintf("%d/%d", k.After.Ghosts, k.After.GhostsStuck+k.After.MissingStuck), strings.Join(k.Leads, ",")+" "+k.Error)
			for _, x := range append(k.Wrong, k.After.Wrong...) {
				fmt.Fprintf(w, "     %s\n", x)
			}
		}
	}
	if len(r.EdgeKills) > 0 {
		fmt.Fprintf(w, "\n%-4s %-7s %-5s %-15s %-10s %-13s %-7s %-12s %s\n", "edge", "killed", "calls", "resumed/clients", "lost/compd", "ghosts/stuck", "back", "back resumed", "error")
		for _, k := range r.EdgeKills {
			fmt.Fprintf(w, "%-4d %-7s %-5d %-15s %-10s %-13s %-7s %-12s %s\n", k.N, k.Edge, k.CallsUp, fmt.Sprintf("%d/%d", k.Resumed, k.Clients),
				fmt.Sprintf("%d/%d", k.Lost, k.Compared), fmt.Sprintf("%d/%d", k.Ghosts, k.GhostsStuck), fmtDur(k.Back),
				fmt.Sprintf("%d/%d", k.BackResumed, k.BackMoved), k.Error+strings.Join(k.Answers, "; "))
			for _, x := range append(k.LostSeen, k.Wrong...) {
				fmt.Fprintf(w, "     %s\n", x)
			}
		}
	}
	r.writePartitions(w)
	l := r.Limited
	fmt.Fprintf(w, "\nlimited users: %d, %d clients; own conversations with the number %d, without %d; others' hidden %d, leaked %d\n",
		l.Users, l.Clients, l.OwnFull, l.OwnBlank, l.Hidden, l.Leaked)
	for _, x := range l.Leaks {
		fmt.Fprintf(w, "     %s\n", x)
	}
	fmt.Fprintf(w, "\n%-13s %-4s %-7s %-7s %-7s %s\n", "from kill/cut", "n", "p50", "p90", "p99", "max")
	for _, name := range []string{"lease", "won", "leading", "resynced", "stalled", "live", "nats_shown", "cut_unready", "cut_step_down", "cut_lease", "cut_live", "cut_rejoined"} {
		s, ok := r.Spread[name]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%-13s %-4d %-7s %-7s %-7s %s\n", name, s.N, fmtDur(s.P50), fmtDur(s.P90), fmtDur(s.P99), fmtDur(s.Max))
	}
	fmt.Fprintln(w)
	r.writeChecks(w)
}
