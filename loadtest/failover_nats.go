package loadtest

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
)

// FailoverNATSKill is what one SIGKILL of a nats-server (of the 3) led
// to, while it stayed dead for FailoverConfig.NATSDown with calls going
// on: the service must go on (the stream and the lease bucket have a
// replica on each server, and 2 of 3 are a quorum).
type FailoverNATSKill struct {
	N       int       `json:"n"`
	At      time.Time `json:"at"`
	Server  string    `json:"server"`
	Leads   []string  `json:"leads"` // the streams it led (the op stream, KV_ the lease bucket)
	CallsUp int       `json:"calls_up"`
	// Shown: every edge's admin client shows a call that pbxsim began
	// after the kill (from the kill; -1 when one did not while the server
	// was down).
	Shown time.Duration `json:"shown_ns"`
	// NotLive counts the edges' admin clients told a pbxStatus other than
	// live while the server was down; NotLiveFor is the longest such spell
	// (to live again, or to the end of the outage).
	NotLive    int           `json:"not_live"`
	NotLiveFor time.Duration `json:"not_live_for_ns"`
	// The lease's holder before the kill and once the server is back
	// (read then, not the run's watch, which may be behind); Moved, the
	// lease was given to another node meanwhile (and maybe back).
	LeaderBefore string `json:"leader_before"`
	LeaderAfter  string `json:"leader_after"`
	Moved        bool   `json:"moved"`
	// The state at the end of the outage, the server still dead: what a
	// client was shown as live then.
	judged
	// Restart: how long the killed server took to be healthy again;
	// After, the state once it was and the edges were in step again
	// (InStep: from the restart; -1 when not within 10 s).
	Restart time.Duration `json:"restart_ns"`
	InStep  time.Duration `json:"in_step_ns"`
	After   judged        `json:"after"`
	Error   string        `json:"error,omitempty"`
}

// killNATS kills a nats-server (in turn: one leading neither the op
// stream nor the lease bucket, the op stream's leader, the lease
// bucket's leader), watches the edges while
// it is dead, judges their state at the end of the outage, then starts it
// again.
func (r *failRun) killNATS(ctx context.Context, n int) FailoverNATSKill {
	s, leads := r.natsVictim(ctx, n)
	k := FailoverNATSKill{N: n, Server: s.Name, Leads: leads, Shown: -1, InStep: -1, LeaderBefore: r.lease.read(ctx), CallsUp: len(r.sc.pbx.pbx.Channels())}
	t0 := time.Now()
	k.At = t0
	s.Kill()
	end := t0.Add(r.cfg.NATSDown)
	shown := make([]time.Time, len(r.edges))
	for time.Now().Before(end) && ctx.Err() == nil {
		for i, e := range r.edges {
			if shown[i].IsZero() && r.truth.begunAfter(e.view.shown(), t0) {
				shown[i] = time.Now()
			}
		}
		if k.Shown < 0 && !slices.ContainsFunc(shown, time.Time.IsZero) {
			k.Shown = slices.MaxFunc(shown, time.Time.Compare).Sub(t0)
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	for _, e := range r.edges {
		stale, live := e.view.staleThenLive(t0)
		if stale.at.IsZero() {
			continue
		}
		k.NotLive++
		if live.IsZero() || live.After(end) {
			live = end
		}
		k.NotLiveFor = max(k.NotLiveFor, live.Sub(stale.at))
	}
	k.judged = r.judge(ctx, nil)
	t1 := time.Now()
	if err := s.Restart(); err != nil {
		k.Error = err.Error()
	}
	k.Restart = time.Since(t1)
	if r.inStep(ctx, 10*time.Second) {
		k.InStep = time.Since(t1)
	}
	k.After = r.judge(ctx, nil)
	k.LeaderAfter = r.lease.read(ctx)
	k.Moved = k.LeaderAfter != k.LeaderBefore || slices.ContainsFunc(r.lease.holdersAfter(t0), func(h string) bool { return h != k.LeaderBefore })
	return k
}

// natsVictim picks the n-th kill's server: one that leads neither the op
// stream nor the lease bucket (else one not leading the op stream), then
// the op stream's leader, then the lease bucket's leader (the n-th server
// when there is none such), and the streams it leads.
func (r *failRun) natsVictim(ctx context.Context, n int) (*natscluster.Server, []string) {
	leaders := r.lease.streamLeaders(ctx)
	led := func(s *natscluster.Server) []string {
		var out []string
		for st, l := range leaders {
			if l == s.Name {
				out = append(out, st)
			}
		}
		slices.Sort(out)
		return out
	}
	ops := func(s *natscluster.Server) bool {
		return slices.ContainsFunc(led(s), func(st string) bool { return !strings.HasPrefix(st, "KV_") })
	}
	lease := func(s *natscluster.Server) bool { return slices.Contains(led(s), "KV_"+r.cfg.LeaseBucket) }
	wants := [][]func(*natscluster.Server) bool{
		{func(s *natscluster.Server) bool { return !ops(s) && !lease(s) }, func(s *natscluster.Server) bool { return !ops(s) }},
		{ops},
		{lease},
	}
	for _, want := range wants[(n-1)%3] {
		for _, s := range r.nats {
			if want(s) {
				return s, led(s)
			}
		}
	}
	s := r.nats[(n-1)%len(r.nats)]
	return s, led(s)
}

// inStep waits, for d at most, until every edge's admin client is at
// the same seq (seen twice in a row, so that no change was between the
// reads); false when they were not.
func (r *failRun) inStep(ctx context.Context, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; sleepCtx(ctx, 10*time.Millisecond) {
		var seqs []uint64
		for range 2 {
			for _, e := range r.edges {
				s, _ := e.view.position()
				seqs = append(seqs, s)
			}
		}
		if !slices.ContainsFunc(seqs, func(s uint64) bool { return s != seqs[0] }) {
			return true
		}
	}
	return false
}

// begunAfter reports whether shown holds an extension whose call on
// pbxsim began after t.
func (t *truth) begunAfter(shown map[string]bool, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for x := range shown {
		if st := t.state[x]; st.busy && st.since.After(at) {
			return true
		}
	}
	return false
}
