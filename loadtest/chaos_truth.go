package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// truth follows pbxsim's channels every 20 ms and remembers, for each
// extension, whether it is in a call and since when, so a sample of the
// bridge's state can be judged fairly: a disagreement counts only when
// pbxsim's truth has held for longer than the grace (the time events
// take to reach the bridge), before and during the sample.
type truth struct {
	busyNow func() map[string]bool // pbxsim's extensions in a call

	mu    sync.Mutex // guards state
	state map[string]truthState
}

type truthState struct {
	busy  bool
	since time.Time // when it last changed
}

func newTruth(busyNow func() map[string]bool) *truth {
	return &truth{busyNow: busyNow, state: map[string]truthState{}}
}

// run polls until ctx ends.
func (t *truth) run(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		t.poll()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (t *truth) poll() {
	busy := t.busyNow()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for x, st := range t.state {
		if st.busy && !busy[x] {
			t.state[x] = truthState{busy: false, since: now}
		}
	}
	for x := range busy {
		if st, ok := t.state[x]; !ok || !st.busy {
			t.state[x] = truthState{busy: true, since: now}
		}
	}
}

// callKey names one call (or one gap between calls) of an extension: the
// extension and when pbxsim's truth for it last changed.
type callKey struct {
	exten string
	since time.Time
}

// judge compares what the bridge showed in a sample requested at asked
// with the truth: ghosts are extensions shown in a call that pbxsim had
// ended at least grace before; missing are extensions in a call on pbxsim
// since at least grace before that the bridge did not show. Call it
// right after the sample's answer arrived.
func (t *truth) judge(shown map[string]bool, asked time.Time, grace time.Duration) (ghosts, missing []callKey) {
	t.poll()
	t.mu.Lock()
	defer t.mu.Unlock()
	settled := asked.Add(-grace)
	for x := range shown {
		if st := t.state[x]; !st.busy && !st.since.IsZero() && st.since.Before(settled) {
			ghosts = append(ghosts, callKey{x, st.since})
		}
	}
	for x, st := range t.state {
		if st.busy && st.since.Before(settled) && !shown[x] {
			missing = append(missing, callKey{x, st.since})
		}
	}
	return ghosts, missing
}

// bridgeView is one REST sample of the bridge's live state: the
// extensions it shows with a conversation, and whether it marked the
// state stale (X-Ctibridge-Stale: the link is not live).
type bridgeView struct {
	busy  map[string]bool
	stale bool
}

// sampleBridge reads GET /astproxy/extensions.
func sampleBridge(ctx context.Context, client *http.Client, base, token string) (bridgeView, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/astproxy/extensions", nil)
	if err != nil {
		return bridgeView{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return bridgeView{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return bridgeView{}, err
	}
	if res.StatusCode != 200 {
		return bridgeView{}, fmt.Errorf("GET /astproxy/extensions: HTTP %d: %s", res.StatusCode, trunc(b))
	}
	var exts map[string]struct {
		Conversations map[string]json.RawMessage `json:"conversations"`
	}
	if err := json.Unmarshal(b, &exts); err != nil {
		return bridgeView{}, fmt.Errorf("GET /astproxy/extensions: %w", err)
	}
	v := bridgeView{busy: map[string]bool{}, stale: res.Header.Get("X-Ctibridge-Stale") == "true"}
	for x, e := range exts {
		if len(e.Conversations) > 0 {
			v.busy[x] = true
		}
	}
	return v, nil
}
