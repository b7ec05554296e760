package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemoPickupAutoAnswer: the demo as `ctibridge demo` runs it (phones
// ringing for different times, registered with a user agent the
// auto-answer table names) shows a pickup: 201 calls 202, which rings
// longer than the others; the operator picks it up to 203 over REST and
// 203 answers at once, never ringing, talking with 201 while 202 would
// still ring.
func TestDemoPickupAutoAnswer(t *testing.T) {
	const ring, spread = time.Second, 6 * time.Second // 202 rings 3 s, 203 5 s
	d := startDemoWith(t, 4, ring, func(c *demoConfig) { c.ringSpread, c.autoAnswer = spread, true })
	op := restLogin(t, d.URL, "operator", "operator")
	pollREST(t, d.URL, op, "/astproxy/extensions", "the 4 phones online", func(x map[string]restExt) bool {
		return len(x) == 4 && x["202"].Status == "online" && x["203"].Status == "online"
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pending := placeCall(ctx, d.Phones["201"], "202")
	pollREST(t, d.URL, op, "/astproxy/extension/202", "202 ringing", func(x restExt) bool { return x.Status == "ringing" })
	start := time.Now()
	if code := postJSON(t, strings.TrimSuffix(d.URL, "/")+"/astproxy/pickup_conv", op, `{"endpointId":"202","destId":"203"}`, nil); code != 200 {
		t.Fatalf("pickup_conv: %d", code)
	}
	var seen []string
	pollREST(t, d.URL, op, "/astproxy/extension/203", "203 talking with 201", func(x restExt) bool {
		seen = append(seen, x.Status)
		for _, c := range x.Conversations {
			if c.Connected && c.CounterpartNum == "201" {
				return true
			}
		}
		return false
	})
	took := time.Since(start)
	t.Logf("203 talking with 201 after %v; its states: %v", took.Round(time.Millisecond), compact(seen))
	for _, s := range seen {
		if s == "ringing" {
			t.Errorf("203 rang (%v): want it answering at once", compact(seen))
		}
	}
	if took >= 2*time.Second {
		t.Errorf("203 answered after %v, want at once", took)
	}
	waitCall(t, pending).hangup(t)
}

// compact drops repeats in a row.
func compact(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}
