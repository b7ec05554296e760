package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/sqldb"
)

// RecorderConfig configures a Recorder. SpoolDir is required.
type RecorderConfig struct {
	// SpoolDir holds the spool every CDR goes through (<data-dir>/spool).
	SpoolDir string
	// MaxSpool bounds the CDRs not yet in the store, in bytes of spool.
	// Default 256 MiB (about 500,000 CDRs). Beyond it new CDRs are
	// dropped, counted and logged.
	MaxSpool int64
	// MaxQueue bounds the CDRs waiting in memory for the spool's fsync
	// (the disk being slower than the PBX). Default 65536; beyond it new
	// CDRs are dropped, counted and logged.
	MaxQueue int
	// Batch is the most CDRs per database write. Default 500.
	Batch int
	// WriteTimeout bounds one database write. Default 10 s.
	WriteTimeout time.Duration
	// RetryMax is the longest pause between attempts while the database
	// is down (backoff from 250 ms, with jitter). Default 10 s.
	RetryMax time.Duration
	// Location is the PBX's time zone, for StartTime. Default time.Local.
	Location *time.Location
	// Log receives outages and drops, rate-limited. Default: discard.
	Log *slog.Logger
	// OnTaken, optional, is called by Run's writer with each group of
	// CDRs just fsynced to the spool (taken for good), in order. It must
	// not block: it holds up the next group (webhook.Service.CDRs queues
	// and returns). The slice must not be kept or modified.
	OnTaken func([]CDR)
}

// RecorderStats counts what the recorder did.
type RecorderStats struct {
	Seen       uint64 // Cdr events observed
	Spooled    uint64 // CDRs fsynced to the spool: taken for good
	Written    uint64 // CDRs handed to the database (duplicates included)
	Dropped    uint64 // CDRs lost: spool or queue full, disk error, unreadable spool line
	Rejected   uint64 // CDRs the database refused, set aside in cdr-rejected.jsonl
	Queued     int64  // CDRs waiting in memory for the fsync
	Pending    int64  // CDRs in the spool, not yet in the database
	SpoolBytes int64  // bytes of those
	SpoolMax   int64  // RecorderConfig.MaxSpool
	StoreDown  bool   // the last database write failed
}

// Recorder writes CDRs from AMI Cdr events. Feed it every AMI message
// with Observe (from the goroutine that reads the PBX) and run Run.
//
// A CDR is taken once it is fsynced to the spool: Observe queues it in
// memory, Run's writer appends everything queued to the spool and
// fsyncs it in one go (group commit: while one fsync runs the next group
// gathers), and Run's drainer writes the spool to the database in
// batches, idempotent on (uniqueid, sequence). A crash loses only what
// was read but not yet synced, at most about two fsyncs' worth of time.
type Recorder struct {
	// Immutable after NewRecorder.
	store Store
	cfg   RecorderConfig
	log   *slog.Logger
	sp    *spool
	wake  chan struct{} // Observe → writer
	kick  chan struct{} // writer → drainer

	mu     sync.Mutex // guards linked and files
	linked map[string]linkedAt
	files  map[string]fileAt // recording file by channel name

	qmu   sync.Mutex // guards queue
	queue []CDR

	seen, written, spooled, dropped, rejected atomic.Uint64
	rejectLogged                              time.Time // owned by the drainer
	queued                                    atomic.Int64
	storeDown                                 atomic.Bool
	spoolOut                                  *sqldb.Outage // spool and queue refusals

	// afterSync, when set (tests), is called by the writer with every
	// group it has synced.
	afterSync func([]CDR)
}

type linkedAt struct {
	linkedid string
	at       time.Time
}

type fileAt struct {
	file string
	at   time.Time
}

// NoteRecording remembers that channel is being recorded into file, so
// that the CDR naming that channel (as its channel or its destination
// channel) carries it as recordingfile: Asterisk's Cdr event has no such
// field. The REST start_record action calls it; Observe does for the
// MIXMONITOR_FILENAME variable a MixMonitor sets, when the PBX sends
// VarSet. Safe from any goroutine.
func (r *Recorder) NoteRecording(channel, file string) {
	if channel == "" || file == "" || !printable(file) {
		return
	}
	r.mu.Lock()
	r.files[strings.Clone(channel)] = fileAt{strings.Clone(file), time.Now()}
	r.mu.Unlock()
}

// recordingOf is the file noted for the CDR's channel or destination.
func (r *Recorder) recordingOf(c *CDR) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.files[c.Channel]; ok {
		return f.file
	}
	return r.files[c.DstChannel].file
}

// printable: no control character can reach the store from a variable.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return len(s) <= 1024
}

// NewRecorder opens (or reopens, resuming it) the spool in cfg.SpoolDir.
func NewRecorder(store Store, cfg RecorderConfig) (*Recorder, error) {
	if cfg.SpoolDir == "" {
		return nil, errors.New("history: recorder: SpoolDir is required")
	}
	if cfg.MaxSpool <= 0 {
		cfg.MaxSpool = 256 << 20
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 65536
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "history")
	sp, err := openSpool(cfg.SpoolDir, cfg.MaxSpool, defaultSegMax)
	if err != nil {
		return nil, err
	}
	return &Recorder{store: store, cfg: cfg, log: log, sp: sp,
		wake: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		linked: map[string]linkedAt{}, files: map[string]fileAt{}, spoolOut: sqldb.NewOutage(log, "cdr spool")}, nil
}

var errQueueFull = errors.New("history: cdr queue full: the disk is not keeping up")

// Observe takes one AMI message. It remembers channels' linkedids (for
// Cdr events without a LinkedID field) and queues Cdr events for the
// spool. It never blocks on the disk or the database. Safe from any
// goroutine.
func (r *Recorder) Observe(m ami.Message) {
	if m.Kind() != ami.KindEvent {
		return
	}
	if m.Event() != ami.EventCdr {
		if m.Event() == ami.EventVarSet && m.Get("Variable") == "MIXMONITOR_FILENAME" {
			r.NoteRecording(m.Get("Channel"), m.Get("Value"))
		}
		if u, l := m.Get("Uniqueid"), m.Get("Linkedid"); u != "" && l != "" {
			r.mu.Lock()
			if old, ok := r.linked[u]; !ok || old.linkedid != l {
				r.linked[u] = linkedAt{l, time.Now()}
			}
			r.mu.Unlock()
		}
		return
	}
	c, ok := FromEvent(m, r.cfg.Location, r.linkedID)
	if !ok {
		return
	}
	if c.RecordingFile == "" {
		c.RecordingFile = r.recordingOf(&c)
	}
	r.seen.Add(1)
	r.qmu.Lock()
	if len(r.queue) >= r.cfg.MaxQueue {
		r.qmu.Unlock()
		r.dropped.Add(1)
		r.spoolOut.Fail(errQueueFull)
		return
	}
	r.queue = append(r.queue, c)
	r.queued.Add(1) // under qmu: the writer's subtraction never passes it
	r.qmu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Recorder) linkedID(uniqueid string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.linked[uniqueid].linkedid
}

// sweep forgets channels seen more than two hours ago.
func (r *Recorder) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, l := range r.linked {
		if now.Sub(l.at) > 2*time.Hour {
			delete(r.linked, u)
		}
	}
	for ch, f := range r.files {
		if now.Sub(f.at) > 12*time.Hour { // a recorded call may be long
			delete(r.files, ch)
		}
	}
}

// Stats returns the counters. Safe from any goroutine.
func (r *Recorder) Stats() RecorderStats {
	b, n := r.sp.Stats()
	return RecorderStats{Seen: r.seen.Load(), Written: r.written.Load(), Spooled: r.spooled.Load(),
		Dropped: r.dropped.Load(), Rejected: r.rejected.Load(), Queued: r.queued.Load(), Pending: n, SpoolBytes: b,
		SpoolMax: r.cfg.MaxSpool, StoreDown: r.storeDown.Load()}
}

// Run syncs queued CDRs to the spool and writes the spool to the
// database until ctx ends; then it syncs what is queued, makes one last
// attempt at the database (unless it is down) and returns ctx's error.
// While the database fails, the spool is retried with backoff; a spool
// left by a previous process is written first.
func (r *Recorder) Run(ctx context.Context) error {
	defer r.sp.Close()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		r.writer(ctx)
	}()
	r.drainer(ctx)
	<-writerDone
	if !r.storeDown.Load() {
		// What is left after finalDrain stays in the spool for the next
		// start.
		r.drain(time.Now().Add(finalDrain))
	}
	return ctx.Err()
}

// writer is the group commit: it takes everything queued, appends it to
// the spool with one fsync, and tells the drainer.
func (r *Recorder) writer(ctx context.Context) {
	var buf []byte
	for {
		select {
		case <-r.wake:
		case <-ctx.Done():
			r.commit(&buf)
			return
		}
		r.commit(&buf)
	}
}

func (r *Recorder) commit(buf *[]byte) {
	r.qmu.Lock()
	group := r.queue
	r.queue = nil // group now belongs to the spool's memory (hot)
	r.qmu.Unlock()
	if len(group) == 0 {
		return
	}
	b := (*buf)[:0]
	// Only whole lines that fit under the bound; the rest is dropped. The
	// spool keeps them in memory too, a batch per hot group.
	free := r.sp.Free()
	fit, first, firstByte := 0, 0, 0
	var hot []hotGroup
	cut := func() {
		if fit > first {
			hot = append(hot, hotGroup{Start: int64(firstByte), End: int64(len(b)), Items: group[first:fit:fit]})
			first, firstByte = fit, len(b)
		}
	}
	for _, c := range group {
		line, err := json.Marshal(c)
		if err != nil || int64(len(b)+len(line)+1) > free {
			break
		}
		b = append(append(b, line...), '\n')
		if fit++; fit-first == r.cfg.Batch {
			cut()
		}
	}
	cut()
	*buf = b
	var err error
	if fit > 0 {
		err = r.sp.Append(b, fit, hot)
	}
	r.queued.Add(-int64(len(group)))
	switch {
	case err != nil:
		r.dropped.Add(uint64(len(group)))
		r.spoolOut.Fail(err)
	case fit < len(group):
		r.spooled.Add(uint64(fit))
		r.dropped.Add(uint64(len(group) - fit))
		r.spoolOut.Fail(ErrSpoolFull)
	default:
		r.spooled.Add(uint64(fit))
		r.spoolOut.OK()
	}
	if err == nil && fit > 0 {
		if r.cfg.OnTaken != nil {
			r.cfg.OnTaken(group[:fit])
		}
		if r.afterSync != nil {
			r.afterSync(group[:fit])
		}
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// drainer writes the spool to the database whenever the writer has
// added to it; while the database fails, only on the backoff's timer.
func (r *Recorder) drainer(ctx context.Context) {
	sweep := time.NewTicker(10 * time.Minute)
	defer sweep.Stop()
	b := sqldb.Backoff{Min: 250 * time.Millisecond, Max: r.cfg.RetryMax}
	out := sqldb.NewOutage(r.log, "cdr database")
	kick := r.kick
	var retry <-chan time.Time
	for first := true; ; first = false {
		if !first {
			select {
			case <-kick:
			case <-retry:
			case now := <-sweep.C:
				r.sweep(now)
				continue
			case <-ctx.Done():
				return
			}
		}
		if err := r.drain(time.Time{}); err != nil {
			r.storeDown.Store(true)
			out.Fail(err)
			kick, retry = nil, time.After(b.Next())
			continue
		}
		r.storeDown.Store(false)
		out.OK()
		b.Reset()
		kick, retry = r.kick, nil
	}
}

// finalDrain bounds Run's last attempt at the database.
const finalDrain = 2 * time.Second

var errStopping = errors.New("history: stopping")

// drain writes the spool to the database, up to the end, or to the first
// batch after stopBy when that is set.
func (r *Recorder) drain(stopBy time.Time) error {
	bad, err := r.sp.Drain(r.cfg.Batch, func(cdrs []CDR) error {
		if !stopBy.IsZero() && time.Now().After(stopBy) {
			return errStopping
		}
		return r.write(cdrs)
	})
	if bad > 0 {
		r.dropped.Add(uint64(bad))
		r.log.Error("unreadable cdr spool lines skipped", "count", bad)
	}
	return err
}

// write writes one batch. A batch the database refuses for what is in
// it (sqldb.IsBadData: a value it cannot store) is halved until the CDRs
// it refuses are found; those are set aside (reject), so that one bad
// record never holds up the spool behind it.
func (r *Recorder) write(cdrs []CDR) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.WriteTimeout)
	err := r.store.Insert(ctx, cdrs)
	cancel()
	switch {
	case err == nil:
		r.written.Add(uint64(len(cdrs)))
		return nil
	case !sqldb.IsBadData(err):
		return err
	case len(cdrs) == 1:
		return r.reject(cdrs[0], err)
	}
	h := len(cdrs) / 2
	if err := r.write(cdrs[:h]); err != nil {
		return err
	}
	return r.write(cdrs[h:])
}

// rejectedFile, in the spool directory, keeps the CDRs the database
// refused, one JSON object a line: {"cdr":{...},"err":"..."}.
const rejectedFile = "cdr-rejected.jsonl"

// reject appends c to rejectedFile (fsynced) and logs it: the first
// refusal with its CDR, later ones once a minute with their count. An
// error here keeps c in the spool.
func (r *Recorder) reject(c CDR, cause error) error {
	line, err := json.Marshal(struct {
		CDR CDR    `json:"cdr"`
		Err string `json:"err"`
	}{c, cause.Error()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(r.cfg.SpoolDir, rejectedFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	n := r.rejected.Add(1)
	if now := time.Now(); n == 1 || now.Sub(r.rejectLogged) >= time.Minute {
		r.log.Error("cdr refused by the database, set aside in the spool directory", "file", rejectedFile,
			"uniqueid", c.UniqueID, "err", cause, "refused_so_far", n)
		r.rejectLogged = now
	}
	return nil
}
