package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/ctibridge/ctibridge/upstream"
	"github.com/ctibridge/ctibridge/wal"
)

// hook is one webhook: a bounded in-memory queue the feed reader fills
// without blocking, a writer that moves it to the on-disk queue with one
// fsync per group, and a sender that POSTs the on-disk queue in order.
type hook struct {
	// Immutable after newHook.
	cfg    Config
	exts   map[string]bool // Config.Extensions; nil: all
	log    *slog.Logger
	client *upstream.Client
	target string // the request URL given to client: "" or "?query"
	q      *wal.Log[record]
	memMax int

	mu   sync.Mutex // guards mem
	mem  []record
	wake chan struct{} // enqueue → writer, capacity 1
	kick chan struct{} // writer → sender, capacity 1

	delivered, failed, dropped atomic.Uint64
	memN                       atomic.Int64
	receiver, queue            *sqldb.Outage // rate-limited logs

	// Owned by the sender.
	buf []byte
}

func newHook(cfg Config, dir string, memMax int, log *slog.Logger) (*hook, error) {
	h := &hook{cfg: cfg, memMax: memMax, wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	h.log = log.With("webhook", cfg.Name)
	h.receiver = sqldb.NewOutage(h.log, "webhook receiver")
	h.queue = sqldb.NewOutage(h.log, "webhook queue")
	if len(cfg.Extensions) > 0 {
		h.exts = map[string]bool{}
		for _, x := range cfg.Extensions {
			h.exts[x] = true
		}
	}
	client, target, err := newClient(&cfg, log)
	if err != nil {
		return nil, err
	}
	h.client, h.target = client, target
	q, err := wal.Open[record](filepath.Join(dir, cfg.Name), wal.Options{Prefix: "events", Max: cfg.MaxQueue})
	if err != nil {
		return nil, err
	}
	h.q = q
	return h, nil
}

// wantsExten reports whether events of exten go to h.
func (h *hook) wantsExten(exten string) bool { return h.exts == nil || h.exts[exten] }

// wantsCDR reports whether the CDR from src to dst goes to h.
func (h *hook) wantsCDR(src, dst string) bool { return h.exts == nil || h.exts[src] || h.exts[dst] }

// enqueue queues r for the writer, or drops it when the memory queue is
// full (the disk slower than the events). Never blocks.
func (h *hook) enqueue(r record) {
	h.mu.Lock()
	if len(h.mem) >= h.memMax {
		h.mu.Unlock()
		h.dropped.Add(1)
		h.queue.Fail(errMemoryFull)
		return
	}
	h.mem = append(h.mem, r)
	h.memN.Add(1)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// writer moves the memory queue to disk until ctx ends, then once more.
func (h *hook) writer(ctx context.Context) {
	var buf []byte
	for {
		select {
		case <-h.wake:
			buf = h.commit(buf)
		case <-ctx.Done():
			h.commit(buf)
			return
		}
	}
}

// commit appends everything queued in memory to the disk queue with one
// fsync; what does not fit under the bound is dropped.
func (h *hook) commit(buf []byte) []byte {
	h.mu.Lock()
	group := h.mem
	h.mem = nil
	h.mu.Unlock()
	if len(group) == 0 {
		return buf
	}
	b := buf[:0]
	free := h.q.Free()
	fit := 0
	for _, r := range group {
		line, err := json.Marshal(r)
		if err != nil || int64(len(b)+len(line)+1) > free {
			break
		}
		b = append(append(b, line...), '\n')
		fit++
	}
	var err error
	if fit > 0 {
		err = h.q.Append(b, fit, nil)
	}
	h.memN.Add(-int64(len(group)))
	switch {
	case err != nil:
		h.dropped.Add(uint64(len(group)))
		h.queue.Fail(err)
	case fit < len(group):
		h.dropped.Add(uint64(len(group) - fit))
		h.queue.Fail(wal.ErrFull)
	default:
		h.queue.OK()
	}
	if err == nil && fit > 0 {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	if cap(b) > 1<<20 {
		b = nil // a burst: let the big buffer go
	}
	return b
}

// sender POSTs the disk queue in order, one event at a time, until ctx
// ends. An event leaves the queue once the receiver answered 2xx, or a
// final refusal (4xx other than 408, 425 and 429).
func (h *hook) sender(ctx context.Context) {
	// A POST under way when ctx ends gets shutdownGrace to finish, so an
	// acknowledgement is rarely lost and a stalled receiver cannot hold
	// up the shutdown.
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownGrace, cancel) })
	defer stop()
	for {
		// Batch 1: the position moves after every acknowledged event,
		// so a restart never resends one.
		bad, err := h.q.Drain(1, func(rs []record) error {
			for _, r := range rs {
				if err := h.deliver(ctx, pctx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if bad > 0 {
			h.dropped.Add(uint64(bad))
			h.log.Error("unreadable webhook queue lines skipped", "count", bad)
		}
		var retry <-chan time.Time
		if err != nil && ctx.Err() == nil {
			h.queue.Fail(err) // the disk: try again in a while
			retry = time.After(time.Second)
		}
		select {
		case <-h.kick:
		case <-retry:
		case <-ctx.Done():
			return
		}
	}
}

// shutdownGrace is how long a POST under way may go on after Run's ctx
// ends.
const shutdownGrace = 2 * time.Second

// pending is the number of events waiting, in memory and on disk.
func (h *hook) pending() int64 {
	_, n := h.q.Stats()
	return n + h.memN.Load()
}

// wantsType reports whether h sends typ.
func (h *hook) wantsType(typ string) bool {
	return len(h.cfg.Events) == 0 || slices.Contains(h.cfg.Events, typ)
}
