package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ghostCheck is how a run looks for ghost calls once its calls have ended.
type ghostCheck struct {
	// pbxChannels, when set, lists the PBX's live channels (the truth);
	// the check first waits up to drain for it to have none.
	pbxChannels func() []string
	drain       time.Duration
	// settle is the wait before the first count; recheck the further wait
	// before the second count, done only when the first found ghosts.
	settle, recheck time.Duration
}

// countGhosts waits for the PBX to end its calls (bounded), waits
// g.settle, and counts ghost_calls (the most extensions any screen shows in
// a call) and ghost_calls_rest (REST's), leaving out extensions the PBX
// still has a channel for (pbx_busy_extensions). When some are found it
// waits g.recheck and counts again: what is still shown is stuck
// (ghost_calls_stuck, ghost_calls_rest_stuck), the rest was late
// (ghost_calls_late, ghost_calls_rest_late).
func (rep *Report) countGhosts(ctx context.Context, g ghostCheck, e2e E2EConfig, screens []*screen) {
	var busy map[string]bool
	if g.pbxChannels != nil {
		t0 := time.Now()
		for busy = channelExtens(g.pbxChannels()); len(busy) > 0 && time.Since(t0) < g.drain; busy = channelExtens(g.pbxChannels()) {
			if sleepCtx(ctx, 100*time.Millisecond); ctx.Err() != nil {
				return
			}
		}
		rep.Counters["pbx_busy_extensions"] = uint64(len(busy))
		rep.Counters["pbx_drain_ms"] = uint64(time.Since(t0).Milliseconds())
	}
	if sleepCtx(ctx, g.settle); ctx.Err() != nil {
		return
	}
	screenN, restGhosts, restLive := rep.ghostsNow(ctx, e2e, screens, g.pbxChannels)
	if g.pbxChannels != nil {
		rep.Counters["rest_shows_pbx_busy"] = uint64(restLive)
	}
	rep.Counters["ghost_calls"], rep.Counters["ghost_calls_rest"] = screenN, uint64(len(restGhosts))
	if screenN+uint64(len(restGhosts)) == 0 || g.recheck <= 0 {
		return
	}
	if sleepCtx(ctx, g.recheck); ctx.Err() != nil {
		return
	}
	stuckN, stuckRest, _ := rep.ghostsNow(ctx, e2e, screens, g.pbxChannels)
	rep.Counters["ghost_calls_stuck"], rep.Counters["ghost_calls_rest_stuck"] = stuckN, uint64(len(stuckRest))
	rep.Counters["ghost_calls_late"] = screenN - min(screenN, stuckN)
	rep.Counters["ghost_calls_rest_late"] = uint64(len(restGhosts) - min(len(restGhosts), len(stuckRest)))
	if stuckN > 0 {
		behind := screensBehind(screens)
		rep.Counters["screens_behind"] = uint64(behind)
		rep.Notes = append(rep.Notes, fmt.Sprintf("a screen still showed %d extensions in a call %v after the PBX had no channel for them, e.g. %s; %d screens had read less far (a lower seq) than the furthest, so were still reading a backlog",
			stuckN, g.settle+g.recheck, ghostExamples(screens, pbxBusy(g.pbxChannels), 5), behind))
	}
	if len(stuckRest) > 0 {
		slices.Sort(stuckRest)
		rep.Notes = append(rep.Notes, fmt.Sprintf("REST still showed %d extensions in a call %v after the PBX had no channel for them, e.g. %v",
			len(stuckRest), g.settle+g.recheck, stuckRest[:min(len(stuckRest), 5)]))
	}
}

// ghostsNow counts ghosts now: the most extensions a screen shows in a
// call, and the extensions REST shows in a call, neither counting those
// the PBX has a channel for, and how many of those REST shows in a call.
// The PBX's channels are read just before the screens and again just
// after REST (a call that ended before the counts or began during them
// is the PBX's, not a ghost). A failed REST read counts in the errors.
func (rep *Report) ghostsNow(ctx context.Context, e2e E2EConfig, screens []*screen, pbxChannels func() []string) (uint64, []string, int) {
	busy := pbxBusy(pbxChannels)
	var n uint64
	for _, s := range screens {
		n = max(n, ghostCount(s, busy))
	}
	exts, err := restExtensions(ctx, e2e)
	if err != nil {
		rep.Errors["rest:"+Kind(err)]++
		rep.FirstErrors["rest:"+Kind(err)] = err.Error()
		return n, nil, 0
	}
	maps.Copy(busy, pbxBusy(pbxChannels))
	rest, live := restGhostsOf(exts, busy)
	return n, rest, live
}

// pbxBusy is the extensions the PBX has a channel for (none without
// pbxChannels).
func pbxBusy(pbxChannels func() []string) map[string]bool {
	if pbxChannels == nil {
		return map[string]bool{}
	}
	return channelExtens(pbxChannels())
}

// channelExtens is the extensions of channel names such as
// "PJSIP/3001-0000002a".
func channelExtens(chans []string) map[string]bool {
	m := map[string]bool{}
	for _, c := range chans {
		_, rest, _ := strings.Cut(c, "/")
		if i := strings.LastIndexByte(rest, '-'); i > 0 {
			rest = rest[:i]
		}
		m[rest] = true
	}
	return m
}

// screensBehind counts the open screens whose last seq read is below the
// furthest screen's: still reading a backlog (the hub wrote it, so it
// sits in their sockets' buffers), so what they show is late, whatever
// the bridge holds.
func screensBehind(screens []*screen) int {
	var furthest uint64
	for _, s := range screens {
		furthest = max(furthest, s.lastSeq.Load())
	}
	n := 0
	for _, s := range screens {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed && s.lastSeq.Load() < furthest {
			n++
		}
	}
	return n
}

// lastShown is what s last showed of each extension.
func lastShown(s *screen) map[string]observation {
	last := map[string]observation{}
	for x, obs := range s.byExten() {
		last[x] = obs[len(obs)-1]
	}
	return last
}

// ghostCount counts extensions a screen last showed in a call, but for
// busy; none on a screen the server closed (clients_dropped: a real
// client reconnects and reads a fresh snapshot).
func ghostCount(s *screen, busy map[string]bool) uint64 {
	return uint64(len(ghosts(s, busy)))
}

// ghosts describes the extensions s last showed in a call, but for busy
// ("3001 busy/1 since 12:00:01.234": status, conversations, when it read
// that), in order; none when the server closed s.
func ghosts(s *screen, busy map[string]bool) []string {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	var out []string
	for x, last := range lastShown(s) {
		if !busy[x] && showsCall(last) {
			out = append(out, fmt.Sprintf("%s %s/%d since %s", x, last.status, last.convs, last.at.Format("15:04:05.000")))
		}
	}
	slices.Sort(out)
	return out
}

// ghostExamples describes up to k of the ghosts of the screen that shows
// the most.
func ghostExamples(screens []*screen, busy map[string]bool, k int) string {
	var worst []string
	for _, s := range screens {
		if g := ghosts(s, busy); len(g) > len(worst) {
			worst = g
		}
	}
	return strings.Join(worst[:min(len(worst), k)], ", ")
}

// showsCall says whether an extension shown as o is in a call: a
// conversation, or a status that says so (not online, offline or dnd; no
// status says nothing).
func showsCall(o observation) bool {
	return o.convs > 0 || (o.status != "" && o.status != "online" && o.status != "offline" && o.status != "dnd")
}

// restExtension is what the ghost count reads of an extension in REST.
type restExtension struct {
	Status        string                     `json:"status"`
	Conversations map[string]json.RawMessage `json:"conversations"`
}

// restExtensions reads GET /astproxy/extensions.
func restExtensions(ctx context.Context, cfg E2EConfig) (map[string]restExtension, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(cfg.HTTP, "/")+"/astproxy/extensions", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	res, err := httpClient(false).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("GET /astproxy/extensions: HTTP %d: %s", res.StatusCode, trunc(b))
	}
	var exts map[string]restExtension
	if err := json.Unmarshal(b, &exts); err != nil {
		return nil, fmt.Errorf("GET /astproxy/extensions: %w", err)
	}
	return exts, nil
}

// restGhosts lists the extensions that REST shows in a call (showsCall: a
// conversation, or a status other than online, offline, dnd), but for
// busy, and counts those of busy it shows in one.
func restGhosts(ctx context.Context, cfg E2EConfig, busy map[string]bool) (ghosts []string, live int, err error) {
	exts, err := restExtensions(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	ghosts, live = restGhostsOf(exts, busy)
	return ghosts, live, nil
}

// restGhostsOf is restGhosts of extensions read.
func restGhostsOf(exts map[string]restExtension, busy map[string]bool) (ghosts []string, live int) {
	for x, e := range exts {
		switch {
		case !showsCall(observation{status: e.Status, convs: len(e.Conversations)}):
		case busy[x]:
			live++
		default:
			ghosts = append(ghosts, x)
		}
	}
	return ghosts, live
}
