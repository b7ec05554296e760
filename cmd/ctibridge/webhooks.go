package main

import (
	"cmp"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/webhook"
)

// webhooks are the configured event integrations (--webhooks): nil when
// none, then every method does nothing.
type webhooks struct {
	cfgs []webhook.Config
	// Set by open: one service for every PBX, or on the bus one per PBX
	// (names[i] svcs[i]'s, "" the default PBX).
	svcs  []*webhook.Service
	names []string
}

// webhookPBX is one PBX's engine for the webhooks (Name "" the default
// PBX's) and, on the bus, whether this node leads it (sending).
type webhookPBX struct {
	webhook.PBX
	sending func() bool
}

// loadWebhooks reads c.webhooks, if set. Call it before openStores: it
// sets c.cdrTaken, the recorder's hook for the cdr events.
func loadWebhooks(c *serveConfig) (*webhooks, error) {
	if c.webhooks == "" {
		return nil, nil
	}
	cfgs, err := webhook.LoadFile(c.webhooks)
	if err != nil {
		return nil, configError{err}
	}
	w := &webhooks{cfgs: cfgs}
	// Called by the recorder's Run, which starts after open.
	c.cdrTaken = w.cdrs
	return w, nil
}

// open opens the webhooks' queues, resuming what a previous process left,
// and registers their metrics. pbxs are every PBX's engine, the default
// PBX's first. Without the bus one service follows them all, its queues
// in <data-dir>/webhooks/<name>. On the bus (sending set) each PBX has a
// service of its own that sends while this node leads that PBX, so that
// one node sends each PBX's events: the default PBX's queues stay in
// <data-dir>/webhooks, a named PBX's are in <data-dir>/webhooks-<pbx>,
// and with several the metrics are labelled pbx="default" or pbx="<pbx>".
// (A named PBX's service follows its engine as one of its Options.PBXs,
// next to an engine that never changes: webhook.Service names the events
// of Options.PBXs only.)
func (w *webhooks) open(c serveConfig, pbxs []webhookPBX, lookup func(string) string, reg prometheus.Registerer, log *slog.Logger) error {
	if w == nil {
		return nil
	}
	log.Info("webhooks", "count", len(w.cfgs), "file", c.webhooks)
	opts := webhook.Options{Dir: filepath.Join(c.dataDir, "webhooks"), Lookup: lookup, Log: log}
	if pbxs[0].sending == nil {
		for _, p := range pbxs[1:] {
			opts.PBXs = append(opts.PBXs, p.PBX)
		}
		return w.add("", pbxs[0].State, opts, reg)
	}
	for _, p := range pbxs {
		o := opts
		o.Sending = p.sending
		state := p.State
		if p.Name != "" {
			o.Dir, o.PBXs, state = filepath.Join(c.dataDir, "webhooks-"+p.Name), []webhook.PBX{p.PBX}, calls.New(calls.Config{})
		}
		r := reg
		if len(pbxs) > 1 {
			r = prometheus.WrapRegistererWith(prometheus.Labels{"pbx": cmp.Or(p.Name, calls.DefaultPBXName)}, reg)
		}
		if err := w.add(p.Name, state, o, r); err != nil {
			w.close()
			return err
		}
	}
	return nil
}

// add opens one service, for PBX pbx on the bus ("" the default PBX's, or
// every PBX's without the bus).
func (w *webhooks) add(pbx string, state webhook.State, opts webhook.Options, reg prometheus.Registerer) error {
	svc, err := webhook.New(state, w.cfgs, opts)
	if err != nil {
		return err
	}
	if err := reg.Register(svc.Collector()); err != nil {
		svc.Close()
		return err
	}
	w.svcs, w.names = append(w.svcs, svc), append(w.names, pbx)
	return nil
}

// cdrs hands the recorder's CDRs to the service of their PBX (a named
// PBX's uniqueid is qualified: qualifyCDRs); with one service, all.
func (w *webhooks) cdrs(cdrs []history.CDR) {
	switch len(w.svcs) {
	case 0: // open failed
		return
	case 1:
		w.svcs[0].CDRs(cdrs)
		return
	}
	known := func(n string) bool { return n != "" && slices.Contains(w.names, n) }
	by := make([][]history.CDR, len(w.svcs))
	for _, cdr := range cdrs {
		pbx, _ := calls.SplitID(cdr.UniqueID, known)
		i := slices.Index(w.names, pbx)
		by[i] = append(by[i], cdr)
	}
	for i, cs := range by {
		if len(cs) > 0 {
			w.svcs[i].CDRs(cs)
		}
	}
}

// run delivers until ctx ends, then writes what is queued to disk. Give
// it a lifetime of its own, stopped after the recorder's, so that the
// recorder's last CDRs are queued.
func (w *webhooks) run(ctx context.Context) {
	if w == nil {
		return
	}
	var wg sync.WaitGroup
	for _, svc := range w.svcs {
		wg.Go(func() { svc.Run(ctx) })
	}
	wg.Wait()
}

// close closes the queues if run never did. Idempotent.
func (w *webhooks) close() {
	if w == nil {
		return
	}
	for _, svc := range w.svcs {
		svc.Close()
	}
}
