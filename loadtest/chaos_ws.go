package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The flood targets: one client looping subscribe grows the
// server's RSS by less than 50 MB and moves the other clients' p99 by
// less than 10%.
const (
	targetFloodRSS = 50 << 20
	targetFloodP99 = 0.10
)

// runChaosWS measures WSClients clients' delivery latency during calls in
// three phases: alone, while one more client sends {"op":"subscribe"} in
// a loop without reading, and alone again; the flood's p99 is compared
// with the two quiet phases' together, so that load from elsewhere that
// comes and goes on a shared machine weighs less. serve's RSS is sampled
// all along and the flood stops early at FloodRSSCap.
func runChaosWS(ctx context.Context, cfg ChaosConfig, dir string, rep *ChaosReport) error {
	ctx, sc, err := newChaosScene(ctx, cfg)
	if err != nil {
		return err
	}
	defer sc.close()
	pbx := sc.pbx
	srv, err := sc.serve(ctx, cfg, dir, pbx.pbx.AMIAddr())
	if err != nil {
		return err
	}
	token, err := srv.login(ctx)
	if err != nil {
		return err
	}
	sc.wg.Go(func() { pbx.calls(ctx, cfg, 3*cfg.WSDuration+10*time.Second) })
	sleepCtx(ctx, min(3*time.Second, cfg.WSDuration)) // calls under way

	var peak atomic.Uint64
	sc.wg.Go(func() { sampleRSS(ctx, srv, &peak) })
	wsCfg := WSConfig{URL: WSURL(srv.httpURL()), Token: token, Clients: cfg.WSClients, Duration: cfg.WSDuration}
	base, err := RunWS(ctx, wsCfg)
	if err != nil {
		return err
	}
	baseRSS := peak.Swap(0)

	flToken, err := srv.loginFlooder(ctx)
	if err != nil {
		return err
	}
	floodCtx, stopFlood := context.WithCancel(ctx)
	var fl flooder
	var capped atomic.Bool
	var fwg sync.WaitGroup
	fwg.Go(func() { fl.run(floodCtx, WSURL(srv.httpURL()), flToken) })
	fwg.Go(func() {
		for floodCtx.Err() == nil {
			if peak.Load() > baseRSS+cfg.FloodRSSCap {
				capped.Store(true)
				stopFlood()
			}
			sleepCtx(floodCtx, 50*time.Millisecond)
		}
	})
	flood, err := RunWS(ctx, wsCfg)
	stopFlood()
	fwg.Wait()
	if err != nil {
		return err
	}
	floodRSS := peak.Swap(0)
	after, err := RunWS(ctx, wsCfg)
	if err != nil {
		return err
	}
	res := floodResult{base: base, flood: flood, after: after, baseRSS: baseRSS, floodRSS: floodRSS, afterRSS: peak.Load(),
		capped: capped.Load(), sent: fl.sent.Load(), conns: fl.conns.Load()}
	res.report(ctx, rep, srv, cfg.FloodRSSCap)
	return nil
}

// floodResult is what the ws scenario measured.
type floodResult struct {
	base, flood, after          *Report // the clients' runs before, with and after the flood
	baseRSS, floodRSS, afterRSS uint64  // serve's peak RSS in each
	capped                      bool    // the flood was stopped at the RSS cap
	sent, conns                 uint64  // the flooder's subscribes and connections
}

// report writes the flood's figures against the targets.
func (f floodResult) report(ctx context.Context, rep *ChaosReport, srv *serveProc, rssCap uint64) {
	const sc = "ws"
	flood, baseRSS, floodRSS, capped := f.flood, f.baseRSS, f.floodRSS, f.capped
	quiet := &Histogram{}
	quiet.Merge(f.base.Latency)
	quiet.Merge(f.after.Latency)
	growth := int64(floodRSS) - int64(baseRSS)
	growthV := fmt.Sprintf("%+.1f MB", float64(growth)/(1<<20))
	if capped {
		growthV = fmt.Sprintf("> %d MB (flood stopped)", rssCap>>20)
	}
	rep.check(sc, "server RSS growth during the flood", growthV, "< 50 MB", !capped && growth < targetFloodRSS, false)
	p0, p1 := quiet.Quantile(0.99), flood.Latency.Quantile(0.99)
	change := -1.0
	if p0 > 0 {
		change = float64(p1-p0) / float64(p0)
	}
	// No event at all during the flood is the worst outcome, not a 0 ms p99.
	starved := flood.Counters["events"] == 0
	if starved {
		change = math.Inf(1)
	}
	rep.check(sc, "other clients' p99 change", fmt.Sprintf("%+.0f%% (%v → %v)", change*100, p0, p1), "< +10%",
		p0 > 0 && !starved && change < targetFloodP99, false)
	_, err := srv.waitReady(ctx, 10*time.Second)
	alive := err == nil
	if _, err := srv.login(ctx); err != nil {
		alive = false
	}
	rep.check(sc, "serve still serving after the flood", fmt.Sprint(alive), "true", alive, true)
	crashes, first := srv.crashes()
	rep.check(sc, "serve crashes (panic, fatal error, race)", fmt.Sprint(crashes), "0", crashes == 0, true)
	if first != "" {
		rep.note("ws: serve crashed: %s", first)
	}
	for k, v := range map[string]float64{
		"rss_baseline_mb": float64(baseRSS) / (1 << 20), "rss_peak_flood_mb": float64(floodRSS) / (1 << 20),
		"rss_peak_after_flood_mb": float64(f.afterRSS) / (1 << 20),
		"p50_quiet_ms":            ms(quiet.Quantile(0.5)), "p99_quiet_ms": ms(p0), "p999_quiet_ms": ms(quiet.Quantile(0.999)),
		"p99_before_ms": ms(f.base.Latency.Quantile(0.99)), "p99_after_ms": ms(f.after.Latency.Quantile(0.99)),
		"p50_flood_ms": ms(flood.Latency.Quantile(0.5)), "p99_flood_ms": ms(p1), "p999_flood_ms": ms(flood.Latency.Quantile(0.999)),
		"events_before": float64(f.base.Counters["events"]), "events_flood": float64(flood.Counters["events"]),
		"clients_dropped_flood": float64(flood.Counters["clients_dropped"]),
		"flood_subscribes_sent": float64(f.sent), "flood_connections": float64(f.conns),
	} {
		rep.count(sc, k, v)
	}
}

// sampleRSS keeps the peak of serve's RSS, every 50 ms, until ctx ends.
func sampleRSS(ctx context.Context, srv *serveProc, peak *atomic.Uint64) {
	for ctx.Err() == nil {
		rss := srv.rss()
		for {
			old := peak.Load()
			if rss <= old || peak.CompareAndSwap(old, rss) {
				break
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// flooder is the hostile client: authenticated, it sends subscribe
// after subscribe and reads nothing; when the server closes it, it
// connects again.
type flooder struct {
	sent, conns atomic.Uint64
}

func (f *flooder) run(ctx context.Context, url, token string) {
	msg := []byte(`{"op":"subscribe","topics":["extensions"]}`)
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	for ctx.Err() == nil {
		c, _, err := d.DialContext(ctx, url, hdr)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		f.conns.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		for ctx.Err() == nil {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if c.WriteMessage(websocket.TextMessage, msg) != nil {
				break
			}
			f.sent.Add(1)
		}
		stop()
		c.Close()
	}
}
