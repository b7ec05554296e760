package ws

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// State is what the hub reads; *calls.Engine satisfies it. Both methods
// must be safe to call from any goroutine and never return nil.
type State interface {
	Snapshot() *calls.Snapshot
	Feed() *calls.Feed
}

// Authenticator checks bearer tokens; *auth.Service satisfies it. It
// returns the token's user and expiry, or auth.ErrTokenExpired (closed
// with 4003) or any other error (closed with 4002).
type Authenticator interface {
	Authenticate(token string) (*auth.User, time.Time, error)
}

// Defaults of Config.
const (
	DefaultAuthTimeout  = 5 * time.Second
	DefaultSlowTimeout  = 10 * time.Second
	DefaultMaxPending   = 8192
	DefaultReplayMax    = calls.DefaultFeedSize
	DefaultReplayMaxAge = 60 * time.Second
	DefaultPingInterval = 30 * time.Second
	DefaultWriteRate    = 100_000
	DefaultClientRate   = 10
	DefaultClientBurst  = 50
	DefaultCloseWait    = 2 * time.Second
)

// Config configures a Hub. The zero value is usable.
type Config struct {
	// AuthTimeout is how long a client that gave no token at the upgrade
	// has to send {"op":"auth"} before it is closed with 4001. Default 5 s.
	AuthTimeout time.Duration
	// SlowTimeout is how long a client may take to accept what is queued
	// for it: a socket write blocked that long drops the client (the
	// watchdog looks ten times per SlowTimeout, at most once a second),
	// and a frame delivered that late after it was queued closes it with
	// 4008. Default 10 s.
	SlowTimeout time.Duration
	// MaxPending bounds a client's queue after coalescing (frames). Past
	// it the queue is dropped and replaced by a fresh snapshot. Default
	// 8192.
	MaxPending int
	// ReplayMax is the most missed changes a resume replays; beyond it the
	// client gets a snapshot. The engine's feed (calls.Config.FeedSize)
	// must hold at least as many. Default 10000.
	ReplayMax int
	// ReplayMaxAge: a resume whose first missed change is older than this
	// gets a snapshot instead. Default 60 s.
	ReplayMaxAge time.Duration
	// WriteRate is how many client wake-ups a second (one socket write
	// each, at most) the fan-out may cost before the hub batches. Below
	// it every change goes out at once; past it changes wait in the feed
	// and go out together, each client getting at most one write per
	// batch, so the writes a second stay near WriteRate whatever the
	// change rate: with 1,000 clients, a batch every 10 ms. A burst of up
	// to 50 ms' worth goes out at once. Default 100,000; negative: no
	// limit (every change at once, batching only what piles up while a
	// client's previous write is in flight).
	WriteRate float64
	// ClientRate and ClientBurst bound what each client may send
	// (messages and control frames alike; a subscribe counts as 5):
	// ClientBurst at once, then ClientRate a second on average. A client
	// past it is closed with 4008. Defaults 10 and 50.
	ClientRate  float64
	ClientBurst int
	// PingInterval is how often the hub sends a WebSocket ping to every
	// client; a client silent (no frame, no pong) for twice that plus 10 s
	// is dropped (a parked one at the next ping after that). Default 30 s.
	PingInterval time.Duration
	// CloseWait is how long a close waits for the client's close reply
	// before dropping the connection, and how long Close waits for all
	// clients to go. Default 2 s.
	CloseWait time.Duration
	// CheckOrigin decides whether to accept an upgrade from the request's
	// Origin. Default: any origin (the token, not a cookie, authenticates,
	// so a foreign page gains nothing it could not do with the token).
	CheckOrigin func(r *http.Request) bool
	// Registerer, when set, receives the hub's metrics (ctibridge_ws_*).
	Registerer prometheus.Registerer
	// Log receives lifecycle lines and dropped clients. Default: discard.
	Log *slog.Logger
	// Epoch names the seq space instead of a random one: nodes that serve
	// the same feed (package bus: the same stream generation) give it the
	// same epoch, so a client resumes on any of them. Default: random.
	Epoch string
}

// Close codes sent to clients (docs/websocket.md "Closing").
const (
	CloseGoingAway     = websocket.CloseGoingAway // 1001: server shutting down
	CloseNoToken       = 4001                     // no token at the upgrade nor as first message in time
	CloseAuthFailed    = 4002                     // unknown or revoked token, or a renewal for another user
	CloseTokenExpired  = 4003                     // the token's time is up
	CloseProtocolError = 4004                     // a message the server does not understand
	CloseTooSlow       = 4008                     // the client could not keep up
	CloseTooMany       = 4008                     // the client sent more than its budget (Config.ClientRate)
)

// Topics of a subscription.
const (
	topicExtensions uint8 = 1 << iota
	topicQueues
	topicParkings
	topicTrunks
	topicMe
	topicPresence
)

var topicNames = map[string]uint8{
	"extensions": topicExtensions, "queues": topicQueues, "parkings": topicParkings,
	"trunks": topicTrunks, "me": topicMe, "presence": topicPresence,
}

// Hub serves GET /ws: it authenticates clients, sends them a snapshot (or
// the events they missed) and then every change of the engine's feed,
// filtered by their permissions and topics.
//
// Usage: h, err := NewHub(eng, authService, cfg); go h.Run(ctx); mount h
// on GET /ws; at shutdown, after http.Server.Shutdown, call h.Close.
//
// Concurrency: ServeHTTP, Close and Run may be called from any goroutine.
// One goroutine (Run) reads the feed and queues frames; every client has
// its own reader goroutine, started by ServeHTTP and waited for by Close,
// while it has something to read (an idle one waits in the poller that
// Run starts: park.go), and a flusher goroutine while a write to it waits
// for its socket; the fan-out's writes go through GOMAXPROCS writer
// goroutines (direct.go) that Run starts. Run never blocks on a client,
// and the engine never blocks on Run.
type Hub struct {
	// Immutable after NewHub.
	cfg   Config
	state State
	auth  Authenticator
	log   *slog.Logger
	m     *metrics
	up    websocket.Upgrader
	epoch string    // names this hub's seq space; resumes need it
	start time.Time // base of frame times (monotonic)

	ctl       chan ctlMsg
	quit      chan struct{} // closed by Close
	done      chan struct{} // closed when Run returns
	closeOnce sync.Once
	running   atomic.Bool

	mu     sync.Mutex // guards conns and closed
	conns  map[*conn]struct{}
	closed bool

	boxed penalties      // users closed for flooding, kept out a while
	wg    sync.WaitGroup // one per upgraded connection

	// Owned by Run.
	clients []*conn
	last    uint64 // last feed seq fanned out
	ents    map[entKey]uint32
	preps   []prep
	pace    bucket // client wake-ups (Config.WriteRate)
	seen    map[entKey]struct{}
	latest  []int
	replay  replayPass // what this pass's replays share (replay.go)
	writers *writers   // direct writes of the fan-out (direct.go)

	poll  atomic.Pointer[poller] // parked connections (park.go), while Run runs; nil where there is none
	stuck watchdog               // flusher writes waiting for a full socket (watchdog.go)
	nwid  atomic.Uint32          // writers handed out to new connections, round robin
}

// NewHub returns a hub over the engine's state, authenticating with a.
func NewHub(state State, a Authenticator, cfg Config) (*Hub, error) {
	if state == nil || a == nil {
		return nil, errors.New("ws: NewHub: state and authenticator are required")
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = DefaultAuthTimeout
	}
	if cfg.SlowTimeout <= 0 {
		cfg.SlowTimeout = DefaultSlowTimeout
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.ReplayMax <= 0 {
		cfg.ReplayMax = DefaultReplayMax
	}
	if cfg.ReplayMaxAge <= 0 {
		cfg.ReplayMaxAge = DefaultReplayMaxAge
	}
	if cfg.WriteRate == 0 {
		cfg.WriteRate = DefaultWriteRate
	}
	if cfg.ClientRate <= 0 {
		cfg.ClientRate = DefaultClientRate
	}
	if cfg.ClientBurst <= 0 {
		cfg.ClientBurst = DefaultClientBurst
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.CloseWait <= 0 {
		cfg.CloseWait = DefaultCloseWait
	}
	if cfg.CheckOrigin == nil {
		cfg.CheckOrigin = func(*http.Request) bool { return true }
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var e [8]byte
	if _, err := rand.Read(e[:]); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Hub{
		cfg: cfg, state: state, auth: a, log: log.With("component", "ws"), m: m,
		epoch: cmp.Or(cfg.Epoch, hex.EncodeToString(e[:])), start: time.Now(),
		ctl: make(chan ctlMsg, 1024), quit: make(chan struct{}), done: make(chan struct{}),
		conns: map[*conn]struct{}{}, ents: map[entKey]uint32{}, seen: map[entKey]struct{}{},
	}
	if cfg.WriteRate > 0 {
		h.pace = newBucket(cfg.WriteRate, cfg.WriteRate/20, 0)
	}
	h.up = websocket.Upgrader{
		// Gorilla only upgrades: frames are read (read.go) and written
		// (frame.go) by this package, so the Conn it makes goes at once.
		// A 256-byte reader instead of net/http's 4 KiB, and no write
		// buffer at all, keep even that short-lived one small.
		ReadBufferSize:  256,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     cfg.CheckOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, reason.Error(), status)
		},
	}
	h.writers = newWriters(h)
	return h, nil
}

// now is the hub clock of frames: nanoseconds since NewHub, monotonic.
func (h *Hub) now() int64 { return int64(time.Since(h.start)) }

// Epoch names this hub's seq space; hello and snapshots carry it and a
// resume is only honoured with the same epoch.
func (h *Hub) Epoch() string { return h.epoch }

type ctlKind uint8

const (
	ctlJoin ctlKind = iota
	ctlSubscribe
	ctlLeave
)

// ctlMsg is a request from a connection's reader. A subscribe's details
// are in conn.sub, so the latest one replaces any the hub has not read.
type ctlMsg struct {
	kind ctlKind
	c    *conn
}

// send hands a request to Run; false when the hub has stopped.
func (h *Hub) send(m ctlMsg) bool {
	select {
	case h.ctl <- m:
		return true
	case <-h.done:
	case <-h.quit:
	}
	return false
}

// Run fans the feed out to the clients until ctx is done or Close is
// called; then it closes every client with 1001 (going away) and returns
// nil after Close, ctx.Err() otherwise. Call it once.
func (h *Hub) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return errors.New("ws: Run called twice")
	}
	defer close(h.done)
	if p, err := newPoller(); err != nil {
		h.log.Warn("ws: no poller: every connection keeps a reader goroutine", "err", err)
	} else if p != nil {
		h.poll.Store(p)
		defer p.stop() // after goAway has woken every parked connection
	}
	defer h.goAway()
	h.writers.start()
	go h.watchStuck()
	feed := h.state.Feed()
	h.last = feed.LastSeq()
	tick := time.NewTicker(h.cfg.PingInterval)
	defer tick.Stop()
	paced := time.NewTimer(time.Hour)
	paced.Stop()
	defer paced.Stop()
	waiting := false
	local := h.localChanged()
	for {
		h.endPass()
		// Fan out at once, unless the last fan-outs spent the write
		// budget: then the changes wait in the feed until it refills.
		var wake <-chan struct{}
		var refill <-chan time.Time
		if d := h.paceWait(); d == 0 {
			waiting = false
			wake = feed.Wait() // before reading, so no append is missed
			h.pump(feed)
		} else {
			paced.Reset(d)
			refill = paced.C
			if !waiting {
				waiting = true
				h.m.paced.Inc()
			}
		}
		select {
		case <-wake:
		case <-refill:
		case m := <-h.ctl:
			h.handle(m)
			h.handleQueued()
		case <-local:
			local = h.localChanged()
			h.localFlip()
		case <-tick.C:
			h.pingAll()
		case <-ctx.Done():
			return ctx.Err()
		case <-h.quit:
			return nil
		}
	}
}

// Close stops Run, sends every client a going-away close, and waits up to
// CloseWait for them to go before dropping the rest. New upgrades are
// refused with 503 from then on. Idempotent; safe from any goroutine.
func (h *Hub) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		close(h.quit)
		if h.running.Load() {
			<-h.done
		}
		h.goAway()
		wait := make(chan struct{})
		go func() { h.wg.Wait(); close(wait) }()
		select {
		case <-wait:
		case <-time.After(h.cfg.CloseWait):
			h.mu.Lock()
			for c := range h.conns {
				c.nc.Close()
			}
			h.mu.Unlock()
			<-wait
		}
		h.log.Info("ws hub closed")
	})
	return nil
}

// goAway asks every connection to close with 1001, sending what it has
// queued first.
func (h *Hub) goAway() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		c.closeWith(CloseGoingAway, "server shutting down", "shutdown", true)
	}
}

// handle serves a request from a connection's reader.
func (h *Hub) handle(m ctlMsg) {
	c := m.c
	switch m.kind {
	case ctlJoin:
		if c.slot < 0 {
			c.slot = len(h.clients)
			h.clients = append(h.clients, c)
		}
	case ctlLeave:
		if i := c.slot; i >= 0 {
			last := len(h.clients) - 1
			h.clients[i] = h.clients[last]
			h.clients[i].slot = i
			h.clients[last] = nil
			h.clients = h.clients[:last]
			c.slot = -1
		}
	case ctlSubscribe:
		c.mu.Lock()
		req := c.sub
		c.sub = nil
		// What is still queued for the previous subscription (snapshot,
		// replay, events) is replaced by what this one sends.
		c.dropState()
		c.mu.Unlock()
		if c.slot < 0 || req == nil {
			return // left already
		}
		c.topics, c.pbxs, c.deltas, c.statusDeltas = req.topics, req.pbxs, req.deltas, req.statusDeltas
		c.subscribed = true
		if req.resume && h.resume(c, req.since) {
			return
		}
		h.sendSnapshot(c, "subscribe")
	}
}

// handleQueued serves the requests already queued after one, up to
// passMax in all, in the same replay pass (replay.go): the resumes of a
// reconnect storm share their frames.
func (h *Hub) handleQueued() {
	for range passMax - 1 {
		select {
		case m := <-h.ctl:
			h.handle(m)
		default:
			return
		}
	}
}

// paceWait is how long the fan-out must wait for the write budget.
func (h *Hub) paceWait() time.Duration {
	if h.cfg.WriteRate < 0 {
		return 0
	}
	return h.pace.wait(h.now())
}
