package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
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
		ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: exten, Server: cfg.SIPAddr, Secret: cfg.Secret, RingTime: cfg.Ring,
			NoAnswer: slices.Contains(cfg.Devices, exten)})
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
	for _, x := range cfg.Devices {
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
