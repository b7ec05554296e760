package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/webhook"
)

// webhooks are the configured event integrations (--webhooks): nil when
// none, then every method does nothing.
type webhooks struct {
	cfgs []webhook.Config
	svc  *webhook.Service // set by open
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
// PBX's first, each with its Sending on the bus (this node sends a PBX's
// events while it leads that PBX): one service follows them all, its
// queues in <data-dir>/webhooks/<name>. The version before had, on the
// bus, a service a named PBX, its queues in <data-dir>/webhooks-<pbx>:
// what they hold is moved into the queues (webhook.Options.Drain).
func (w *webhooks) open(c *serveConfig, pbxs []webhook.PBX, lookup func(string) string, reg prometheus.Registerer, log *slog.Logger) error {
	if w == nil {
		return nil
	}
	log.Info("webhooks", "count", len(w.cfgs), "file", c.webhooks)
	var old []string
	found, _ := filepath.Glob(filepath.Join(c.dataDir, "webhooks-*")) // the pattern is valid
	for _, d := range found {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			old = append(old, d)
		}
	}
	opts := webhook.Options{Dir: filepath.Join(c.dataDir, "webhooks"), Lookup: lookup, Log: log,
		Sending: pbxs[0].Sending, PBXs: pbxs[1:], Drain: old}
	svc, err := webhook.New(pbxs[0].State, w.cfgs, opts)
	if err != nil {
		return err
	}
	if err := reg.Register(svc.Collector()); err != nil {
		svc.Close()
		return err
	}
	w.svc = svc
	return nil
}

// cdrs hands the recorder's CDRs to the service (a named PBX's uniqueid
// is qualified: qualifyCDRs).
func (w *webhooks) cdrs(cdrs []history.CDR) {
	if w.svc != nil { // nil: open failed
		w.svc.CDRs(cdrs)
	}
}

// run delivers until ctx ends, then writes what is queued to disk. Give
// it a lifetime of its own, stopped after the recorder's, so that the
// recorder's last CDRs are queued.
func (w *webhooks) run(ctx context.Context) {
	if w == nil || w.svc == nil {
		return
	}
	w.svc.Run(ctx)
}

// close closes the queues if run never did. Idempotent.
func (w *webhooks) close() {
	if w == nil || w.svc == nil {
		return
	}
	w.svc.Close()
}
