package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/loadtest/internal/wsframe"
)

// screens are an e2e run's WebSocket clients, as cheap as wsbench's: the
// sockets are read by wsframe's epoll Readers (a goroutine per core), and
// a screen's cost per event is a look at the message's head (op, seq,
// type), a comparison with the same seq's bytes already decoded by its
// reader goroutine, and 16 bytes appended to its record. Every screen is
// the same user, so a change's message is the same bytes on every screen:
// it is decoded once per reader goroutine, not once per screen. What each
// screen showed is rebuilt from its record after the run (byExten).
type screens struct {
	screens []*screen
	workers []*screenWorker // one per Readers worker
	readers *wsframe.Readers
	ws      wsRun        // only its error counts, kept by wsRun.epollError
	sub     atomic.Int64 // screens with their first snapshot
	failed  atomic.Int64 // connections that ended before it
	dropped atomic.Int64 // connections the server ended after it
	allIn   chan struct{}
	once    sync.Once
	ending  atomic.Bool // the run closes the connections: not counted
	bound   *time.Timer // stops the screens after the run's bound
	stopped sync.Once
	rep     *Report // what the clients saw (drops, errors, bytes), once stopped
}

// screenWorker is what one Readers worker decoded; only that worker
// appends to it (under mu, which readers of table take for reading).
type screenWorker struct {
	mu    sync.RWMutex
	table []decodedUpdate
	bySeq map[uint64]int32 // seq → index in table of its extenUpdate (worker only)
	bytes uint64           // message bytes read (worker only)
}

// decodedUpdate is one extension as an update showed it.
type decodedUpdate struct {
	raw   []byte // the message it was decoded from (events only)
	exten string
	o     observation // without its time
}

// screenRec is one update a screen read: when, and which (an index in
// its worker's table). 8 bytes and no pointer, so that tens of millions
// (500 calls/s for 10 s on 1,000 screens) cost the GC nothing.
type screenRec struct {
	at uint32 // µs since the screen's epoch (71 minutes at most)
	u  int32
}

// screen is what one WebSocket client read.
type screen struct {
	w          *screenWorker
	epoch      int64         // Unix ns: the zero of its records' times
	subscribed bool          // its first snapshot came (worker only)
	lastSeq    atomic.Uint64 // the highest seq read (written by its worker only)

	mu      sync.Mutex
	recs    []screenRec
	closed  bool // the server closed it: what it shows is no longer live
	resyncs int  // snapshots after the first (queue overflows)
}

// observation is an extension as a client showed it.
type observation struct {
	at        time.Time
	status    string
	connected bool // a conversation is connected
	convs     int
}

// extenJSON is what a screen reads of an extension.
type extenJSON struct {
	Exten         string `json:"exten"`
	Status        string `json:"status"`
	Conversations map[string]struct {
		Connected bool `json:"connected"`
	} `json:"conversations"`
}

func (e *extenJSON) observation() observation {
	o := observation{status: e.Status, convs: len(e.Conversations)}
	for _, c := range e.Conversations {
		o.connected = o.connected || c.Connected
	}
	return o
}

func newScreen(w *screenWorker) *screen { return &screen{w: w, epoch: time.Now().UnixNano()} }

func newScreenWorker() *screenWorker { return &screenWorker{bySeq: map[uint64]int32{}} }

// add records u, read at, on s (its worker's goroutine, or a test).
func (s *screen) add(at int64, u decodedUpdate) {
	s.w.mu.Lock()
	s.w.table = append(s.w.table, u)
	i := int32(len(s.w.table) - 1)
	s.w.mu.Unlock()
	s.record(at, i)
}

func (s *screen) record(at int64, i int32) {
	us := uint32(min(max(at-s.epoch, 0)/1e3, math.MaxUint32))
	s.mu.Lock()
	s.recs = append(s.recs, screenRec{at: us, u: i})
	s.mu.Unlock()
}

// event handles an event message (the whole message, valid during the
// call) read at now, on s's worker goroutine.
func (s *screen) event(now int64, seq uint64, raw []byte) {
	w := s.w
	if i, ok := w.bySeq[seq]; ok && bytes.Equal(w.table[i].raw, raw) {
		s.record(now, i)
		return
	}
	var m struct {
		Data extenJSON `json:"data"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	s.add(now, decodedUpdate{raw: bytes.Clone(raw), exten: m.Data.Exten, o: m.Data.observation()})
	if _, ok := w.bySeq[seq]; !ok {
		w.bySeq[seq] = int32(len(w.table) - 1) // only this goroutine appends
	}
}

// resync records a resync snapshot: every extension as it shows, as if
// updated at read time at (a real screen redraws from it).
func (s *screen) resync(at int64, raw []byte) {
	var m struct {
		Extensions map[string]extenJSON `json:"extensions"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	s.mu.Lock()
	s.resyncs++
	s.mu.Unlock()
	for x, e := range m.Extensions {
		s.add(at, decodedUpdate{exten: x, o: e.observation()})
	}
}

// byExten is what s read, extension by extension, in read order.
func (s *screen) byExten() map[string][]observation {
	s.mu.Lock()
	recs := s.recs
	s.mu.Unlock()
	s.w.mu.RLock()
	defer s.w.mu.RUnlock()
	m := map[string][]observation{}
	for _, r := range recs {
		u := &s.w.table[r.u]
		o := u.o
		o.at = time.Unix(0, s.epoch+int64(r.at)*1e3)
		m[u.exten] = append(m[u.exten], o)
	}
	return m
}

// startScreens connects cfg.Clients screens, read for at most total, and
// returns once all have their snapshot.
func startScreens(ctx context.Context, cfg E2EConfig, total time.Duration) (*screens, error) {
	u, err := url.Parse(WSURL(cfg.HTTP))
	if err != nil || u.Scheme != "ws" || u.Host == "" {
		return nil, fmt.Errorf("loadtest: e2e: the screens read ws:// only (epoll), not %q", WSURL(cfg.HTTP))
	}
	w := &screens{screens: make([]*screen, cfg.Clients), allIn: make(chan struct{})}
	n := runtime.GOMAXPROCS(0)
	for range n {
		w.workers = append(w.workers, newScreenWorker())
	}
	if w.readers, err = wsframe.NewWholeReaders(n, w); err != nil {
		return nil, fmt.Errorf("loadtest: e2e: %w", err)
	}
	w.bound = time.AfterFunc(total, w.stop)
	for i := range w.screens {
		// Readers hands connection i to worker i % n.
		w.screens[i] = newScreen(w.workers[i%n])
	}
	sub := []byte(`{"op":"subscribe","topics":["extensions"]}`)
	path := u.EscapedPath()
	dials := make(chan struct{}, 64)
	for i := range w.screens {
		go func() {
			select {
			case dials <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-dials }()
			if err := w.readers.Dial(u.Host, path, cfg.Token, i, sub); err != nil {
				w.failed.Add(1)
				w.ws.epollError(err)
				w.gone()
			}
		}()
	}
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	select {
	case <-w.allIn:
		if w.failed.Load() == 0 {
			return w, nil
		}
		w.stop()
		n, f := w.ws.errs.snapshot()
		return nil, fmt.Errorf("loadtest: e2e: %d of %d WebSocket clients could not subscribe: %v %v", w.failed.Load(), cfg.Clients, n, f)
	case <-timeout.C:
		w.stop()
		return nil, fmt.Errorf("loadtest: e2e: WebSocket clients not subscribed after 15 s (%d of %d)", w.sub.Load(), cfg.Clients)
	case <-ctx.Done():
		w.stop()
		return nil, ctx.Err()
	}
}

// gone counts a screen settled (subscribed or failed): allIn closes when
// every one is.
func (w *screens) gone() {
	if w.sub.Load()+w.failed.Load() == int64(len(w.screens)) {
		w.once.Do(func() { close(w.allIn) })
	}
}

// Message implements wsframe.Handler: called for screen id on worker's
// goroutine, never concurrently for one worker.
func (w *screens) Message(worker, id int, msg []byte, now int64) {
	s := w.screens[id]
	w.workers[worker].bytes += uint64(len(msg))
	if len(msg) < 2 || msg[0] != '{' || msg[len(msg)-1] != '}' {
		w.ws.errs.addKind(ErrNotJSON, fmt.Sprintf("not JSON: %q", trunc(msg)))
		return
	}
	seq := wsframe.UintField(msg, `"seq":`)
	switch string(wsframe.Field(msg, `"op":"`)) {
	case "snapshot":
		s.lastSeq.Store(seq)
		if s.subscribed {
			s.resync(now, msg)
			return
		}
		s.subscribed = true
		w.sub.Add(1)
		w.gone()
	case "event":
		if last := s.lastSeq.Load(); seq < last {
			w.ws.errs.addKind(ErrSeqBack, fmt.Sprintf("client %d: seq %d after %d", id, seq, last))
		} else {
			s.lastSeq.Store(seq)
		}
		if string(wsframe.Field(msg, `"type":"`)) == "extenUpdate" {
			s.event(now, seq, msg)
		}
	case "resumed", "hello", "pong", "renewed":
	default:
		w.ws.errs.addKind(ErrBadResponse, fmt.Sprintf("unknown message %q", trunc(msg)))
	}
}

// Binary implements wsframe.BinaryHandler (ctibridge sends none).
func (w *screens) Binary(_, _ int, n uint64) {
	w.ws.errs.addKind(ErrBinary, fmt.Sprintf("a binary frame of %d bytes", n))
}

// Closed implements wsframe.Handler: the server closed a connection, or
// it broke.
func (w *screens) Closed(_, id int, err error) {
	if w.ending.Load() {
		return
	}
	s := w.screens[id]
	w.ws.epollError(err)
	if !s.subscribed {
		w.failed.Add(1)
		w.gone()
		return
	}
	w.dropped.Add(1)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// stop closes every connection and fills w.rep; it may be called twice.
func (w *screens) stop() {
	w.stopped.Do(func() {
		w.ending.Store(true)
		if w.bound != nil {
			w.bound.Stop()
		}
		if w.readers != nil {
			w.readers.Close()
		}
		w.rep = &Report{Counters: map[string]uint64{"clients_dropped": uint64(w.dropped.Load())}, Bytes: w.bytesRead()}
		w.rep.Errors, w.rep.FirstErrors = w.ws.errs.snapshot()
	})
}

// bytesRead is what the screens read (once stopped, or on their
// workers' goroutine).
func (w *screens) bytesRead() (n uint64) {
	for _, x := range w.workers {
		n += x.bytes
	}
	return n
}
