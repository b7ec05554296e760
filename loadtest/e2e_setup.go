package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/pbxsim"
	"github.com/ctibridge/ctibridge/sipp"
)

// setDefaults fills the zero fields of an e2e run.
func (cfg *E2EConfig) setDefaults() {
	if cfg.Rate <= 0 {
		cfg.Rate = 10
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Ring <= 0 {
		cfg.Ring = 100 * time.Millisecond
	}
	if cfg.Talk <= 0 {
		cfg.Talk = time.Second
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 5
	}
	if cfg.RESTRate == 0 {
		cfg.RESTRate = 20
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 15 * time.Second
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
}

// generator picks what places the calls (SIPp when installed, else the
// built-in phones) and writes the run's notes.
func (cfg *E2EConfig) generator() (gen string, notes []string, err error) {
	if len(cfg.Callers) == 0 || len(cfg.Callers) != len(cfg.Callees) {
		return "", nil, fmt.Errorf("loadtest: e2e: want as many callers as callees, at least one (got %d and %d)", len(cfg.Callers), len(cfg.Callees))
	}
	gen = cfg.Generator
	if gen == "" {
		gen = "sipp"
		if _, err := sipp.LookPath(cfg.SIPpBinary); err != nil {
			gen = "phones"
			notes = append(notes, "SIPp is not installed (apt-get install sip-tester): the calls were placed by the built-in sipgo phones")
		}
	}
	if gen != "sipp" && gen != "phones" {
		return "", nil, fmt.Errorf("loadtest: e2e: unknown generator %q (sipp or phones)", gen)
	}
	notes = append(notes, fmt.Sprintf("calls placed by %s: %d pairs, ring %v, talk %v; %d WebSocket clients; REST reads at %.0f/s",
		map[string]string{"sipp": "SIPp (register_invite_client.xml, INVITE and 200 OK times from its message trace)", "phones": "built-in sipgo phones"}[gen],
		len(cfg.Callers), cfg.Ring, cfg.Talk, cfg.Clients, max(cfg.RESTRate, 0)))
	if need := int(math.Ceil(cfg.Rate * (cfg.Ring + cfg.Talk + 300*time.Millisecond).Seconds())); need > len(cfg.Callers) {
		notes = append(notes, fmt.Sprintf("only %d caller/callee pairs for %.0f calls/s lasting %v: calls wait for a free pair, so fewer are placed", len(cfg.Callers), cfg.Rate, cfg.Ring+cfg.Talk))
	}
	return gen, notes, nil
}

// e2ePhones are the run's built-in phones: the callees, which ring then
// answer, and the callers when they place the calls.
type e2ePhones struct {
	callees, callers map[string]*pbxsim.Phone
	cancel           context.CancelFunc
	wg               sync.WaitGroup
}

// startE2EPhones starts and registers the phones (the callers too when
// withCallers); stop ends them.
func startE2EPhones(ctx context.Context, cfg E2EConfig, withCallers bool) (*e2ePhones, error) {
	phoneCtx, cancel := context.WithCancel(context.Background())
	p := &e2ePhones{callees: map[string]*pbxsim.Phone{}, callers: map[string]*pbxsim.Phone{}, cancel: cancel}
	add := func(into map[string]*pbxsim.Phone, exten string) error {
		ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: exten, Server: cfg.SIPAddr, Secret: cfg.Secret, RingTime: cfg.Ring})
		if err != nil {
			return err
		}
		p.wg.Go(func() { ph.Run(phoneCtx) })
		into[exten] = ph
		return nil
	}
	for _, x := range cfg.Callees {
		if err := add(p.callees, x); err != nil {
			p.stop()
			return nil, err
		}
	}
	if withCallers {
		for _, x := range cfg.Callers {
			if err := add(p.callers, x); err != nil {
				p.stop()
				return nil, err
			}
		}
	}
	if err := p.register(ctx); err != nil {
		p.stop()
		return nil, fmt.Errorf("loadtest: e2e: register: %w", err)
	}
	return p, nil
}

func (p *e2ePhones) stop() {
	p.cancel()
	p.wg.Wait()
}

// register registers every phone, 32 at a time.
func (p *e2ePhones) register(ctx context.Context) error {
	var mu sync.Mutex
	var errs []error
	var rwg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, phs := range []map[string]*pbxsim.Phone{p.callees, p.callers} {
		for x, ph := range phs {
			rwg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				rctx, rc := context.WithTimeout(ctx, 5*time.Second)
				defer rc()
				if err := ph.Register(rctx, time.Hour); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("phone %s: %w", x, err))
					mu.Unlock()
				}
			})
		}
	}
	rwg.Wait()
	return errors.Join(errs...)
}

// screensRun is the run's WebSocket clients, each recording every
// extenUpdate on its screen.
type screensRun struct {
	screens []*screen
	rep     *Report
	err     error
	done    chan struct{}
	cancel  context.CancelFunc
}

// startScreens connects cfg.Clients screens for total and returns once
// all have subscribed.
func startScreens(ctx context.Context, cfg E2EConfig, total time.Duration) (*screensRun, error) {
	w := &screensRun{screens: make([]*screen, cfg.Clients), done: make(chan struct{})}
	dec := &decoded{m: map[string]decodedUpdate{}}
	for i := range w.screens {
		w.screens[i] = &screen{byExt: map[string][]observation{}, dec: dec}
	}
	var subscribed atomic.Int64
	allIn := make(chan struct{})
	wsCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		w.rep, w.err = RunWS(wsCtx, WSConfig{URL: WSURL(cfg.HTTP), Token: cfg.Token, Clients: cfg.Clients, Duration: total, Epoll: true,
			OnEvent:  func(c int, at time.Time, raw []byte) { w.screens[c].add(at, raw) },
			OnResync: func(c int, at time.Time, raw []byte) { w.screens[c].resync(at, raw) },
			OnDropped: func(c int) {
				w.screens[c].mu.Lock()
				w.screens[c].closed = true
				w.screens[c].mu.Unlock()
			},
			OnSubscribed: func(int) {
				if subscribed.Add(1) == int64(cfg.Clients) {
					close(allIn)
				}
			}})
	}()
	select {
	case <-allIn:
		return w, nil
	case <-w.done:
		if w.err != nil {
			return nil, w.err
		}
		return nil, fmt.Errorf("loadtest: e2e: WebSocket clients could not subscribe: %v %v", w.rep.Errors, w.rep.FirstErrors)
	case <-time.After(15 * time.Second):
		w.stop()
		return nil, fmt.Errorf("loadtest: e2e: WebSocket clients not subscribed after 15 s (%d of %d)", subscribed.Load(), cfg.Clients)
	case <-ctx.Done():
		w.stop()
		return nil, ctx.Err()
	}
}

// stop ends the clients and waits for them; it may be called twice.
func (w *screensRun) stop() {
	w.cancel()
	<-w.done
}

// addClients adds what the WebSocket and REST clients of an e2e run saw.
func (rep *Report) addClients(ws, rest *Report) {
	if ws != nil {
		rep.Counters["clients_dropped"] = ws.Counters["clients_dropped"]
		for k, v := range ws.Errors {
			rep.Errors["ws:"+k] += v
			rep.FirstErrors["ws:"+k] = ws.FirstErrors[k]
		}
		rep.Bytes = ws.Bytes
	}
	if rest != nil {
		rep.Extra = append(rep.Extra, Series{Name: "REST GET /astproxy/extensions", Latency: rest.Latency, PerSecond: rest.PerSecond})
		rep.Non2xx = rest.Non2xx
		for k, v := range rest.Errors {
			rep.Errors["rest:"+k] += v
			rep.FirstErrors["rest:"+k] = rest.FirstErrors[k]
		}
	}
}
