package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/calls"
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
	c.cdrTaken = func(cdrs []history.CDR) { w.svc.CDRs(cdrs) }
	return w, nil
}

// open opens the webhooks' queues (<data-dir>/webhooks/<name>), resuming
// what a previous process left, and registers their metrics.
// The named PBXs' engines (--pbx) are pbxs. On the bus, sending says
// whether this node leads: one node sends.
func (w *webhooks) open(c serveConfig, eng *calls.Engine, pbxs []webhook.PBX, lookup func(string) string, sending func() bool, reg prometheus.Registerer, log *slog.Logger) error {
	if w == nil {
		return nil
	}
	svc, err := webhook.New(eng, w.cfgs, webhook.Options{Dir: filepath.Join(c.dataDir, "webhooks"), Lookup: lookup, Log: log, PBXs: pbxs, Sending: sending})
	if err != nil {
		return err
	}
	if err := reg.Register(svc.Collector()); err != nil {
		svc.Close()
		return err
	}
	w.svc = svc
	log.Info("webhooks", "count", len(w.cfgs), "file", c.webhooks)
	return nil
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
	if w != nil && w.svc != nil {
		w.svc.Close()
	}
}
