package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest/netns"
)

// FailoverPartition is what cutting the leading bridge off from NATS led
// to: its NATS connections go through a network namespace whose veth
// link is taken down (every packet dropped both ways), while its AMI
// link and its REST stay up, and `POST /astproxy/call` is asked of it
// every 100 ms until a second after every edge is live again under the
// other bridge. The durations are from the cut; -1 when it did not
// happen within FailoverConfig.KillTimeout.
type FailoverPartition struct {
	N       int       `json:"n"`
	At      time.Time `json:"at"`
	Cut     string    `json:"cut"`        // the leader cut off
	Leader  string    `json:"new_leader"` // who took the lease
	CallsUp int       `json:"calls_up"`
	// Unready: the cut-off bridge's /readyz no longer 200 (it cannot
	// hear its stream); StepDown: its /metrics no longer says it leads
	// (ctibridge_bus_role, its grant ended); Lease: the other bridge
	// holds the lease; Opened: the other bridge logged in to pbxsim;
	// Live: every edge's client told live again (after it was told
	// stale).
	Unready  time.Duration `json:"unready_ns"`
	StepDown time.Duration `json:"step_down_ns"`
	Lease    time.Duration `json:"lease_ns"`
	Opened   time.Duration `json:"opened_ns"`
	Live     time.Duration `json:"live_ns"`
	// Asked actions of the cut-off bridge's REST: Accepted (2xx),
	// Refused (503 lease_stale), Other (any other answer, by status and
	// code, the first in OtherFirst); LastAccepted: the last accepted.
	Asked        int            `json:"asked"`
	Accepted     int            `json:"accepted"`
	Refused      int            `json:"refused_lease_stale"`
	Other        map[string]int `json:"other,omitempty"`
	LastAccepted time.Duration  `json:"last_accepted_ns"`
	// Reached: the cut-off bridge's Originates pbxsim got after the cut.
	// NotLeader: actions that act on the PBX (Originate, Hangup,
	// Redirect, ...: not a login, ping or list) pbxsim got from the
	// cut-off bridge's AMI user once the other bridge's link was open, to
	// the round's end (two nodes driving one PBX: must be 0);
	// NotLeaderFirst the first few. Reads: the others then (the CDR
	// observer every bridge keeps logged in pings).
	Reached        int      `json:"reached"`
	Reads          int      `json:"reads"`
	NotLeader      int      `json:"not_leader_actions"`
	NotLeaderFirst []string `json:"not_leader_first,omitempty"`
	// Rejoined: after the heal, the cut-off bridge ready again (a
	// standby), from the heal.
	Rejoined time.Duration `json:"rejoined_ns"`
	judged
	Error string `json:"error,omitempty"`
}

// pbxActions is every action pbxsim got, with the AMI user of the
// session (each bridge logs in as its node name).
type pbxActions struct {
	mu  sync.Mutex
	all []pbxAction
}

type pbxAction struct {
	at           time.Time
	user, action string
}

func (l *pbxActions) trace(s *ami.Session, m ami.Message) {
	a := m.Action()
	if a == "" {
		return
	}
	user := s.User()
	if strings.EqualFold(a, "Login") {
		user = m.Get("Username")
	}
	l.mu.Lock()
	l.all = append(l.all, pbxAction{at: time.Now(), user: user, action: a})
	l.mu.Unlock()
}

// between is the actions of user in [from, to).
func (l *pbxActions) between(user string, from, to time.Time) []pbxAction {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []pbxAction
	for _, a := range l.all {
		if a.user == user && !a.at.Before(from) && a.at.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// cutOffNATS prepares the partitions: one network namespace per bridge,
// through which its NATS connections go (netns.Through, one relay per
// server), so either can be cut off while it leads. It returns the NATS
// URLs per bridge; none, with the reason noted, where no namespace can be
// made (not root).
func (r *failRun) cutOffNATS() (map[string]string, error) {
	if r.cfg.Partitions <= 0 {
		return nil, nil
	}
	urls := map[string]string{}
	r.nets = map[string]*netns.NS{}
	for i := range 2 {
		name := "bridge-" + string(rune('a'+i))
		ns, err := netns.New()
		if errors.Is(err, netns.ErrUnavailable) {
			r.partSkip = err.Error()
			r.closeNets()
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		r.nets[name] = ns
		var list []string
		for _, s := range r.nats {
			addr, err := ns.Through("127.0.0.1:" + strconv.Itoa(s.Port))
			if err != nil {
				return nil, err
			}
			list = append(list, "nats://"+addr)
		}
		urls[name] = strings.Join(list, ",")
	}
	return urls, nil
}

func (r *failRun) closeNets() {
	for _, ns := range r.nets {
		ns.Close()
	}
	r.nets = nil
}

// partitionOnce cuts the leader off from NATS and measures its step-down,
// the takeover, the actions asked of it and what pbxsim got from it;
// then heals the partition and waits for it to rejoin as a standby.
func (r *failRun) partitionOnce(ctx context.Context, n int) FailoverPartition {
	p := FailoverPartition{N: n, Cut: r.lease.holder(), Unready: -1, StepDown: -1, Lease: -1, Opened: -1, Live: -1, LastAccepted: -1, Rejoined: -1}
	cut, ns := r.bridge(p.Cut), r.nets[p.Cut]
	if cut == nil || ns == nil {
		p.Error = "no namespace for the leader " + p.Cut
		return p
	}
	other := r.bridges[0]
	if other == cut {
		other = r.bridges[1]
	}
	token, err := Login(ctx, cut.proc.httpURL(), "admin", "admin", false)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.CallsUp = len(r.sc.pbx.pbx.Channels())
	t0 := time.Now()
	p.At = t0
	if err := ns.Down(); err != nil {
		p.Error = err.Error()
		return p
	}
	actx, stopActs := context.WithCancel(ctx)
	acted := make(chan struct{})
	go func() { defer close(acted); r.askActions(actx, cut, token, t0, &p) }()
	r.watchPartition(ctx, cut, t0, &p)
	if p.Live >= 0 {
		sleepCtx(ctx, time.Second) // actions asked of a node that is not the leader any more
	}
	stopActs()
	<-acted
	for _, a := range r.pbxLog.between(other.name, t0, time.Now()) {
		if strings.EqualFold(a.action, "Login") {
			p.Opened = a.at.Sub(t0)
			break
		}
	}
	if p.Live >= 0 {
		p.judged = r.judge(ctx, nil)
	}
	healed := time.Now()
	if err := ns.Up(); err != nil {
		p.Error = "heal: " + err.Error()
		return p
	}
	for deadline := healed.Add(60 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; sleepCtx(ctx, 50*time.Millisecond) {
		if cut.proc.ready(ctx) {
			p.Rejoined = time.Since(healed)
			break
		}
	}
	for _, a := range r.pbxLog.between(p.Cut, t0, time.Now()) {
		if a.action == ami.ActionOriginate {
			p.Reached++
		}
		if p.Opened >= 0 && !a.at.Before(t0.Add(p.Opened)) && readOnly[a.action] {
			p.Reads++
		} else if p.Opened >= 0 && !a.at.Before(t0.Add(p.Opened)) {
			p.NotLeader++
			if len(p.NotLeaderFirst) < 5 {
				p.NotLeaderFirst = append(p.NotLeaderFirst, fmt.Sprintf("%s %s after the other's login", a.action, fmtDur(a.at.Sub(t0.Add(p.Opened)))))
			}
		}
	}
	return p
}

// watchPartition waits, KillTimeout at most, until the cut-off bridge
// stepped down, the other holds the lease and every edge was told stale
// then live again.
func (r *failRun) watchPartition(ctx context.Context, cut *failNode, t0 time.Time, p *FailoverPartition) {
	for deadline := t0.Add(r.cfg.KillTimeout); time.Now().Before(deadline) && ctx.Err() == nil; sleepCtx(ctx, 20*time.Millisecond) {
		if p.Unready < 0 && !cut.proc.ready(ctx) {
			p.Unready = time.Since(t0)
		}
		if leads, err := leadsByMetrics(ctx, cut.proc.adminURL()); p.StepDown < 0 && err == nil && !leads {
			p.StepDown = time.Since(t0)
		}
		if got := r.lease.takenAfter(t0, p.Cut, time.Time{}); p.Lease < 0 && got.holder != "" {
			p.Lease, p.Leader = got.at.Sub(t0), got.holder
		}
		var live time.Time
		all := true
		for _, e := range r.edges {
			s, l := e.view.staleThenLive(t0)
			if s.at.IsZero() || l.IsZero() {
				all = false
			}
			if l.After(live) {
				live = l
			}
		}
		if all && p.Lease >= 0 && p.StepDown >= 0 {
			p.Live = live.Sub(t0)
			return
		}
	}
}

// readOnly are the actions that do not act on the PBX: logins, pings,
// lists and reads (what a bridge's CDR observer and resync send).
var readOnly = map[string]bool{"Login": true, "Logoff": true, "Challenge": true, "Ping": true, "Events": true,
	ami.ActionCoreShowChannels: true, ami.ActionExtensionStateList: true, ami.ActionExtensionState: true, ami.ActionDeviceStateList: true,
	ami.ActionPJSIPShowEndpoints: true, ami.ActionPJSIPShowEndpoint: true, ami.ActionPJSIPShowContacts: true, ami.ActionQueueStatus: true,
	ami.ActionQueueSummary: true, ami.ActionParkedCalls: true, ami.ActionParkinglots: true, ami.ActionCoreStatus: true,
	ami.ActionMailboxCount: true, ami.ActionMailboxStatus: true, ami.ActionVoicemailUsersList: true}

// leadsByMetrics reports whether the node's admin /metrics says it
// leads (ctibridge_bus_role{role="leader"} 1).
func leadsByMetrics(ctx context.Context, admin string) (bool, error) {
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, "GET", admin+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		return false, fmt.Errorf("metrics: %d %v", res.StatusCode, err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "ctibridge_bus_role{") && strings.Contains(line, `role="leader"`) {
			return strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]) == "1", nil
		}
	}
	return false, nil
}

// askActions asks the cut-off bridge's REST for a call every 100 ms
// until ctx ends: from a callee's endpoint, which has no phone
// registered, so an Originate that gets through fails at once on pbxsim
// (no call, no CDR), yet pbxsim logs it.
func (r *failRun) askActions(ctx context.Context, cut *failNode, token string, t0 time.Time, p *FailoverPartition) {
	client := httpClient(false)
	body := fmt.Appendf(nil, `{"endpointId":%q,"number":"9999"}`, r.sc.pbx.callees[len(r.sc.pbx.callees)-1])
	p.Other = map[string]int{}
	for ctx.Err() == nil {
		at := time.Now()
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(c, "POST", cut.proc.httpURL()+"/astproxy/call", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			p.Asked++
			p.Other["error"]++
		default:
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			p.Asked++
			switch {
			case res.StatusCode/100 == 2:
				p.Accepted++
				p.LastAccepted = at.Sub(t0)
			case res.StatusCode == 503 && bytes.Contains(b, []byte("lease_stale")):
				p.Refused++
			default:
				p.Other[strconv.Itoa(res.StatusCode)+" "+errorCode(b)]++
			}
		}
		cancel()
		sleepCtx(ctx, time.Until(at.Add(100*time.Millisecond)))
	}
}

// errorCode is the "code" of a REST error body, or its start.
func errorCode(b []byte) string {
	if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
		rest := b[i+len(`"code":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			return string(rest[:j])
		}
	}
	return string(b[:min(len(b), 40)])
}

// partitionChecks: every partition taken over, the cut-off bridge
// stepped down before the other led, and pbxsim got no action of it once
// the other's link was open.
func (r *failRun) partitionChecks(rep *FailoverReport) {
	const sc = "failover"
	rep.Partitions = r.parts
	if r.cfg.Partitions == 0 {
		return
	}
	if r.partSkip != "" {
		rep.note("partitions skipped: %s", r.partSkip)
		rep.count(sc, "partitions_skipped", float64(r.cfg.Partitions))
		return
	}
	var stepDown, lease, live, rejoined []time.Duration
	takenOver, early, notLeader, lateAccepted, accepted, refused, asked, failed := 0, 0, 0, 0, 0, 0, 0, 0
	for _, p := range r.parts {
		stepDown, lease, live, rejoined = append(stepDown, p.StepDown), append(lease, p.Lease), append(live, p.Live), append(rejoined, p.Rejoined)
		if p.Lease >= 0 && p.Live >= 0 && p.Error == "" {
			takenOver++
		}
		if p.StepDown < 0 || p.Lease < 0 || p.Opened < 0 || p.StepDown >= min(p.Lease, p.Opened) {
			early++
		}
		if p.Opened < 0 || p.Rejoined < 0 {
			failed++
		}
		notLeader += p.NotLeader
		if p.StepDown >= 0 && p.LastAccepted >= p.StepDown {
			lateAccepted++
		}
		accepted += p.Accepted
		refused += p.Refused
		asked += p.Asked
	}
	var unready []time.Duration
	for _, p := range r.parts {
		unready = append(unready, p.Unready)
	}
	rep.Spread["cut_unready"] = spreadOf(unready)
	rep.Spread["cut_step_down"], rep.Spread["cut_lease"], rep.Spread["cut_live"] = spreadOf(stepDown), spreadOf(lease), spreadOf(live)
	rep.Spread["cut_rejoined"] = spreadOf(rejoined)
	n := r.cfg.Partitions
	rep.check(sc, "partitions taken over (lease, every edge live)", fmt.Sprintf("%d of %d", takenOver, n), "all", takenOver == n, true)
	rep.check(sc, "partitions: cut-off leader not stepped down before the other led", fmt.Sprint(early), "0", early == 0 && len(r.parts) > 0, true)
	rep.check(sc, "partitions: actions pbxsim got from a bridge not leading", fmt.Sprint(notLeader), "0", notLeader == 0 && len(r.parts) > 0, true)
	rep.check(sc, "partitions: actions accepted by the cut-off bridge after it stepped down", fmt.Sprint(lateAccepted), "0", lateAccepted == 0, true)
	rep.check(sc, "partitions: other's link not seen open, or cut-off bridge not back", fmt.Sprint(failed), "0", failed == 0, true)
	p := rep.Spread["cut_live"].P99
	rep.check(sc, "partitions: edges live again, p99", fmtDur(p), "<= "+fmtDur(takeoverTarget), p >= 0 && p <= takeoverTarget, false)
	rep.count(sc, "partitions", float64(len(r.parts)))
	rep.count(sc, "partition_actions_asked", float64(asked))
	rep.count(sc, "partition_actions_accepted", float64(accepted))
	rep.count(sc, "partition_actions_refused_lease_stale", float64(refused))
}

// writePartitions prints the partition rounds.
func (r *FailoverReport) writePartitions(w io.Writer) {
	if len(r.Partitions) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-4s %-9s %-10s %-5s %-7s %-9s %-6s %-6s %-6s %-24s %-7s %-10s %-8s %s\n", "cut", "cut off", "new leader", "calls", "unready", "step down",
		"lease", "opened", "live", "asked acc/stale/other", "reached", "not leader", "rejoined", "ghosts/s, error")
	for _, p := range r.Partitions {
		other := 0
		for _, v := range p.Other {
			other += v
		}
		fmt.Fprintf(w, "%-4d %-9s %-10s %-5d %-7s %-9s %-6s %-6s %-6s %-24s %-7d %-10d %-8s %s\n", p.N, p.Cut, p.Leader, p.CallsUp, fmtDur(p.Unready), fmtDur(p.StepDown),
			fmtDur(p.Lease), fmtDur(p.Opened), fmtDur(p.Live), fmt.Sprintf("%d %d/%d/%d", p.Asked, p.Accepted, p.Refused, other), p.Reached,
			p.NotLeader, fmtDur(p.Rejoined), fmt.Sprintf("%d/%d %s", p.Ghosts, p.GhostsStuck+p.MissingStuck, p.Error))
		for _, x := range append(p.NotLeaderFirst, p.Wrong...) {
			fmt.Fprintf(w, "     %s\n", x)
		}
		for k, v := range p.Other {
			fmt.Fprintf(w, "     answered %s: %d\n", k, v)
		}
	}
}
