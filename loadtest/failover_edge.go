package loadtest

import (
	"context"
	"fmt"
	"maps"
	"time"
)

// FailoverEdgeKill is what one SIGKILL of an edge led to: its WebSocket
// clients resume on another edge with their seq and epoch and must miss
// no change; the edge is started again RestartDelay later and they move
// back to it.
type FailoverEdgeKill struct {
	N       int       `json:"n"`
	At      time.Time `json:"at"`
	Edge    string    `json:"edge"`
	CallsUp int       `json:"calls_up"`
	// Clients were on the killed edge; Resumed of them were answered
	// "resumed" on another edge (same epoch, from their seq); Answers are
	// the others' answers.
	Clients int      `json:"clients"`
	Resumed int      `json:"resumed"`
	Answers []string `json:"answers,omitempty"`
	// Compared clients were compared, at the same seq, with the client of
	// the same user that stayed on the edge they resumed on: Lost counts
	// the extensions one showed otherwise (a change lost or doubled).
	Compared int      `json:"compared"`
	Lost     int      `json:"lost"`
	LostSeen []string `json:"lost_seen,omitempty"`
	// The state once the clients resumed: judged (the dead edge's REST
	// not read).
	judged
	// Back: the killed edge ready again, from the kill; BackResumed of
	// the BackMoved clients moved back to it were answered "resumed".
	Back        time.Duration `json:"back_ns"`
	BackMoved   int           `json:"back_moved"`
	BackResumed int           `json:"back_resumed"`
	Error       string        `json:"error,omitempty"`
}

// killEdge kills the n-th edge in turn and moves its clients to the next
// edge, then back once it is up again.
func (r *failRun) killEdge(ctx context.Context, n int) FailoverEdgeKill {
	i := (n - 1) % len(r.edges)
	e, to := r.edges[i], r.edges[(i+1)%len(r.edges)]
	k := FailoverEdgeKill{N: n, Edge: e.name, Back: -1, CallsUp: len(r.sc.pbx.pbx.Channels())}
	type moved struct {
		user string
		view *wsView
		ref  *wsView // the same user's client on to
	}
	var ms []moved
	ref := map[string]*wsView{}
	for _, c := range r.clients {
		if c.on == to {
			ref[c.user] = c.view
		}
	}
	for _, c := range r.clients {
		if c.on == e {
			ms = append(ms, moved{c.user, c.view, ref[c.user]})
		}
	}
	if r.edges[r.onEdge] == e {
		ms = append(ms, moved{"admin", r.resume, ref["admin"]})
	}
	k.Clients = len(ms)
	t0 := time.Now()
	k.At = t0
	if !e.proc.kill9() {
		k.Error = e.name + " was not running"
		return k
	}
	for _, m := range ms {
		select {
		case <-m.view.closed():
		case <-time.After(5 * time.Second):
			m.view.close() // the kernel closes a killed process's sockets: not seen
		}
		m.view.close()
		if err := m.view.connect(ctx, to.proc.httpURL(), to.tokens[m.user], true); err != nil {
			k.Answers = append(k.Answers, err.Error())
			continue
		}
		if _, a := m.view.position(); a == "resumed" {
			k.Resumed++
		} else {
			k.Answers = append(k.Answers, a)
		}
	}
	for _, c := range r.clients {
		if c.on == e {
			c.on = to
		}
	}
	if r.edges[r.onEdge] == e {
		r.onEdge = (i + 1) % len(r.edges)
	}
	sleepCtx(ctx, r.cfg.Grace) // the missed changes come after the answer
	for _, m := range ms {
		if m.ref == nil {
			continue
		}
		k.Compared++
		lost := sameSeqDiff(ctx, m.view, m.ref)
		k.Lost += len(lost)
		for _, x := range lost {
			if len(k.LostSeen) < 5 {
				k.LostSeen = append(k.LostSeen, m.user+": "+x)
			}
		}
	}
	k.judged = r.judge(ctx, e)
	if _, err := e.proc.waitReady(ctx, 60*time.Second); err != nil {
		k.Error = err.Error()
		return k
	}
	k.Back = time.Since(t0)
	if err := r.login(ctx, e); err != nil { // its sessions may not have outlived it
		k.Error = err.Error()
		return k
	}
	for _, c := range r.clients {
		if c.home != e {
			continue
		}
		c.view.close()
		k.BackMoved++
		if err := c.view.connect(ctx, e.proc.httpURL(), e.tokens[c.user], true); err != nil {
			k.Error = err.Error()
			continue
		}
		c.on = e
		if _, a := c.view.position(); a == "resumed" {
			k.BackResumed++
		}
	}
	return k
}

// sameSeqDiff waits (3 s at most) until a and b are at the same seq under
// the same epoch, and returns the extensions they show otherwise then
// ("exten: a's | b's"); one line saying so when they never were.
func sameSeqDiff(ctx context.Context, a, b *wsView) []string {
	var last string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; sleepCtx(ctx, 10*time.Millisecond) {
		sa, ea, da := a.shows()
		sb, eb, db := b.shows()
		if sa2, _, _ := a.shows(); sa != sb || sa2 != sa || ea != eb {
			last = fmt.Sprintf("never at the same seq (last %d and %d, epochs %q %q)", sa, sb, ea, eb)
			continue
		}
		var diff []string
		for x := range maps.Keys(da) {
			if da[x] != db[x] {
				diff = append(diff, x+": "+da[x]+" | "+db[x])
			}
		}
		for x := range maps.Keys(db) {
			if _, ok := da[x]; !ok {
				diff = append(diff, x+": (none) | "+db[x])
			}
		}
		return diff
	}
	return []string{last}
}
