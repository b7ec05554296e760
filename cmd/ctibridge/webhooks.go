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
	svc  *webhook.Service
	stop context.CancelFunc
	done chan struct{}
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
	// Called by the recorder's Run, which starts after start.
	c.cdrTaken = func(cdrs []history.CDR) { w.svc.CDRs(cdrs) }
	return w, nil
}

// start opens the webhooks' queues (<data-dir>/webhooks/<name>) and runs
// them on a lifetime of their own: stop them after the recorder, so that
// its last CDRs are queued.
func (w *webhooks) start(c serveConfig, eng *calls.Engine, lookup func(string) string, reg prometheus.Registerer, log *slog.Logger) error {
	if w == nil {
		return nil
	}
	svc, err := webhook.New(eng, w.cfgs, webhook.Options{Dir: filepath.Join(c.dataDir, "webhooks"), Lookup: lookup, Log: log})
	if err != nil {
		return err
	}
	if err := reg.Register(svc.Collector()); err != nil {
		svc.Close()
		return err
	}
	w.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	w.stop, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		svc.Run(ctx)
	}()
	log.Info("webhooks", "count", len(w.cfgs), "file", c.webhooks)
	return nil
}

// shutdown writes what is queued to disk and waits for the senders.
func (w *webhooks) shutdown() {
	if w == nil || w.stop == nil {
		return
	}
	w.stop()
	<-w.done
}
