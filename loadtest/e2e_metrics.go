package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// hubCounters are the WebSocket hub's counters an e2e run reads from the
// bridge's admin /metrics before and after its calls: what the bridge
// wrote for them.
var hubCounters = map[string]string{
	"ctibridge_ws_messages_sent_total": "ws_messages_sent",
	"ctibridge_ws_writes_total":        "ws_writes",
	"ctibridge_ws_bytes_sent_total":    "ws_bytes_sent",
	"ctibridge_ws_coalesced_total":     "ws_coalesced",
}

// readHubCounters reads hubCounters from admin's /metrics (nil when it
// cannot: no admin listener given, or it does not answer).
func readHubCounters(ctx context.Context, admin string) map[string]float64 {
	if admin == "" {
		return nil
	}
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(admin, "/")+"/metrics", nil)
	if err != nil {
		return nil
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if short, known := hubCounters[name]; ok && known {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				m[short] = f
			}
		}
	}
	if sc.Err() != nil {
		return nil
	}
	return m
}

// addHubCounters adds the hub's counters over the calls (after minus
// before) and what they make per answered call and screen.
func (rep *Report) addHubCounters(before, after map[string]float64, clients int) {
	if before == nil || after == nil {
		return
	}
	for _, k := range hubCounters {
		rep.Counters[k] = uint64(max(after[k]-before[k], 0))
	}
	calls := float64(rep.Counters["calls_answered"])
	if calls == 0 || clients == 0 {
		return
	}
	per := calls * float64(clients)
	rep.Notes = append(rep.Notes, fmt.Sprintf("the bridge wrote, per answered call and screen, %.3g messages in %.3g socket writes, %.0f bytes (%d coalesced away in all)",
		float64(rep.Counters["ws_messages_sent"])/per, float64(rep.Counters["ws_writes"])/per, float64(rep.Counters["ws_bytes_sent"])/per, rep.Counters["ws_coalesced"]))
}
