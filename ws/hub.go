package ws

import (
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
	DefaultAuthTimeout   = 5 * time.Second
	DefaultSlowTimeout   = 10 * time.Second
	DefaultMaxPending    = 8192
	DefaultReplayMax     = calls.DefaultFeedSize
	DefaultReplayMaxAge  = 60 * time.Second
	DefaultPingInterval  = 30 * time.Second
	DefaultWriteInterval = 10 * time.Millisecond
	DefaultCloseWait     = 2 * time.Second
)

// Config configures a Hub. The zero value is usable.
type Config struct {
	// AuthTimeout is how long a client that gave no token at the upgrade
	// has to send {"op":"auth"} before it is closed with 4001. Default 5 s.
	AuthTimeout time.Duration
	// SlowTimeout is how long a client may take to accept what is queued
	// for it: a socket write blocked that long, or a frame delivered that
	// late after it was queued, closes the client with 4008. Default 10 s.
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
	// WriteInterval is the shortest time between two socket writes to
	// one client: frames queued meanwhile go out together in the next
	// write. It bounds the syscalls per client and second under load and
	// adds at most that much latency; a client idle for longer is written
	// to at once. Default 10 ms; negative: no wait.
	WriteInterval time.Duration
	// PingInterval is how often the hub sends a WebSocket ping to every
	// client; a client silent (no frame, no pong) for twice that plus 10 s
	// is dropped. Default 30 s.
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
}

// Close codes sent to clients (docs/websocket.md "Closing").
const (
	CloseGoingAway     = websocket.CloseGoingAway // 1001: server shutting down
	CloseNoToken       = 4001                     // no token at the upgrade nor as first message in time
	CloseAuthFailed    = 4002                     // unknown or revoked token, or a renewal for another user
	CloseTokenExpired  = 4003                     // the token's time is up
	CloseProtocolError = 4004                     // a message the server does not understand
	CloseTooSlow       = 4008                     // the client could not keep up
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
// its own reader (the ServeHTTP goroutine) and writer goroutine. Run
// never blocks on a client, and the engine never blocks on Run.
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
	wg     sync.WaitGroup // one per upgraded connection

	// Owned by Run.
	clients []*conn
	last    uint64 // last feed seq fanned out
	ents    map[entKey]uint32
	preps   []prep
	vc      verCache
	memo    [numKinds]map[string]memo
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
	if cfg.WriteInterval == 0 {
		cfg.WriteInterval = DefaultWriteInterval
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
		epoch: hex.EncodeToString(e[:]), start: time.Now(),
		ctl: make(chan ctlMsg, 1024), quit: make(chan struct{}), done: make(chan struct{}),
		conns: map[*conn]struct{}{}, ents: map[entKey]uint32{},
	}
	h.up = websocket.Upgrader{
		// Clients send little: a 1 KiB reader instead of net/http's 4 KiB
		// saves 30 MB per 10,000 clients. Writes bypass gorilla (frame.go),
		// so it gets no write buffer at all.
		ReadBufferSize:  1024,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     cfg.CheckOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, reason.Error(), status)
		},
	}
	for k := range h.memo {
		h.memo[k] = map[string]memo{}
	}
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

type ctlMsg struct {
	kind   ctlKind
	c      *conn
	topics uint8
	since  uint64
	resume bool
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
	defer h.goAway()
	feed := h.state.Feed()
	h.last = feed.LastSeq()
	tick := time.NewTicker(h.cfg.PingInterval)
	defer tick.Stop()
	for {
		wake := feed.Wait() // before reading, so no append is missed
		h.pump(feed)
		select {
		case <-wake:
		case m := <-h.ctl:
			h.handle(m)
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
		if c.slot < 0 {
			return // left already
		}
		// Whatever is still queued for the previous subscription is
		// older than what follows, so it does no harm and stays.
		c.topics = m.topics
		c.subscribed = true
		if m.resume && h.resume(c, m.since) {
			return
		}
		h.sendSnapshot(c, "subscribe")
	}
}

// pump fans out what the feed holds beyond h.last.
func (h *Hub) pump(feed *calls.Feed) {
	if feed.LastSeq() == h.last {
		return
	}
	cs, ok := feed.Since(h.last)
	if !ok {
		// The feed moved more than its whole buffer past us (or was
		// replaced): nobody can be brought up to date by events.
		h.log.Warn("ws hub fell behind the feed: resending snapshots", "last_seq", h.last)
		h.last = feed.LastSeq()
		for _, c := range h.clients {
			if c.subscribed {
				h.resync(c)
			}
		}
		return
	}
	if len(cs) == 0 {
		return
	}
	h.fanout(cs)
	h.last = cs[len(cs)-1].Seq
}

// kind classifies a change type for routing and filtering.
type kind uint8

const (
	kindOther kind = iota
	kindExt
	kindRing
	kindQueue
	kindMember
	kindPark
	kindTrunk
	kindStatus
	kindPresence
	kindConf
	numKinds
)

func kindOf(typ string) kind {
	switch typ {
	case "extenUpdate":
		return kindExt
	case "extenRinging":
		return kindRing
	case "queueUpdate":
		return kindQueue
	case "queueMemberUpdate":
		return kindMember
	case "parkingUpdate":
		return kindPark
	case "trunkUpdate":
		return kindTrunk
	case "pbxStatus":
		return kindStatus
	case "userPresenceUpdate":
		return kindPresence
	case "conferenceUpdate":
		return kindConf
	}
	return kindOther
}

// entKey names an entity for coalescing.
type entKey struct {
	k   kind
	key string
}

// entPing is the coalescing id of the hub's pings.
const entPing = 1

// prep is one change being fanned out, with its frames made at most once.
type prep struct {
	ch   *calls.Change
	kind kind
	ent  uint32
	full *frame // the change as everyone allowed to see it sees it
	red  *frame // redacted, made on first need
}

func (h *Hub) prepare(p *prep, ch *calls.Change, at int64) {
	p.ch, p.kind, p.red = ch, kindOf(ch.Type), nil
	p.ent = 0
	if p.kind != kindRing && p.kind != kindOther {
		k := entKey{p.kind, ch.Key}
		id, ok := h.ents[k]
		if !ok {
			id = uint32(len(h.ents)) + 2 // 0: never coalesced, 1: ping
			h.ents[k] = id
		}
		p.ent = id
	}
	p.full = &frame{b: eventFrame(ch, ch.Data), seq: ch.Seq, ent: p.ent, at: at, msgs: 1}
}

// frameFor is the frame of p that c gets, or nil when c does not get it.
// The filter is auth.View's (the one REST uses): what a user may not see
// is exactly what ViewOf(nil) hides, so every client that may not see an
// entity's details shares one redacted frame. TestFilterMatchesView
// checks this against auth.ViewOf(user) for every kind of user.
func (h *Hub) frameFor(c *conn, p *prep) *frame {
	u := c.user
	var sees bool
	switch p.kind {
	case kindExt:
		if c.topics&topicExtensions == 0 && (c.topics&topicMe == 0 || !u.Owns(p.ch.Key)) {
			return nil
		}
		sees = c.full || auth.Allowed(u, auth.SeeCalls, p.ch.Key)
	case kindRing:
		// To the owners of the rung extension only; never redacted, as
		// an owner sees its own calls.
		if c.topics&(topicExtensions|topicMe) == 0 || !u.Owns(p.ch.Key) {
			return nil
		}
		return p.full
	case kindQueue, kindMember:
		if c.topics&topicQueues == 0 {
			return nil
		}
		sees = c.seesUnowned
	case kindPark:
		if c.topics&topicParkings == 0 {
			return nil
		}
		sees = c.seesUnowned
	case kindTrunk:
		if c.topics&topicTrunks == 0 {
			return nil
		}
		sees = c.seesUnowned
	case kindStatus:
		return p.full
	case kindPresence:
		// Opt-in (topic "presence"); presence is never hidden (auth.View).
		if c.topics&topicPresence == 0 {
			return nil
		}
		return p.full
	case kindConf:
		if c.topics&(topicExtensions|topicMe) == 0 || !(c.seesUnowned || confMember(u, p.ch.Key, p.ch.Data)) {
			return nil
		}
		if c.seesUnowned {
			return p.full
		}
		// Members this user may not see are blanked per user (rooms are
		// few and change seldom).
		if red := auth.ViewOf(u).Conference(p.ch.Data); !sameBytes(red, p.ch.Data) {
			return &frame{b: eventFrame(p.ch, red), seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
		}
		return p.full
	default:
		// A change type this hub does not know: only to those who see
		// everything, so nothing leaks.
		if !c.full {
			return nil
		}
		return p.full
	}
	if sees {
		return p.full
	}
	if p.red == nil {
		red := redact(p.kind, p.ch.Key, p.ch.Data)
		if sameBytes(red, p.ch.Data) {
			p.red = p.full
		} else {
			p.red = &frame{b: eventFrame(p.ch, red), seq: p.full.seq, ent: p.ent, at: p.full.at, msgs: 1}
		}
	}
	return p.red
}

// redact is the JSON of an entity as a user who may see none of its call
// details sees it.
func redact(k kind, key string, data []byte) []byte {
	nobody := auth.ViewOf(nil)
	switch k {
	case kindExt:
		return nobody.Extension(key, data)
	case kindTrunk:
		return nobody.Trunk(data)
	case kindQueue, kindMember:
		return nobody.Queue(data)
	case kindPark:
		return nobody.Parking(data)
	}
	return data
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fanout queues a batch of changes to every subscribed client: one lock
// and at most one wake-up per client per batch, and no allocation per
// client (the frames are shared).
func (h *Hub) fanout(cs []calls.Change) {
	at := h.now()
	preps := h.preps[:0]
	for i := range cs {
		preps = append(preps, prep{})
		h.prepare(&preps[len(preps)-1], &cs[i], at)
	}
	var coalesced uint64
	for _, c := range h.clients {
		if !c.subscribed {
			continue
		}
		n := 0
		c.mu.Lock()
		if c.closing != nil {
			c.mu.Unlock()
			continue
		}
		for i := range preps {
			p := &preps[i]
			if p.ch.Seq <= c.base {
				continue // already in the snapshot it was sent
			}
			if f := h.frameFor(c, p); f != nil {
				if c.push(f) {
					coalesced++
				}
				n++
			}
		}
		over := c.live > h.cfg.MaxPending
		c.mu.Unlock()
		if over {
			h.resync(c)
		} else if n > 0 {
			c.signal()
		}
	}
	if coalesced > 0 {
		h.m.coalesced.Add(float64(coalesced))
	}
	clear(preps)
	h.preps = preps[:0]
}

// pingAll queues a WebSocket ping to every client: it keeps NATs open and
// lets the reader's deadline find dead peers.
func (h *Hub) pingAll() {
	f := &frame{b: pingBytes, ent: entPing, at: h.now()}
	for _, c := range h.clients {
		c.mu.Lock()
		if c.closing == nil {
			c.push(f)
		}
		c.mu.Unlock()
		c.signal()
	}
}

// resync replaces whatever is queued for c by a fresh snapshot.
func (h *Hub) resync(c *conn) {
	c.mu.Lock()
	c.dropQueued()
	c.mu.Unlock()
	h.sendSnapshot(c, "resync")
}

// sendSnapshot queues a snapshot for c, and the changes the hub has fanned
// out that the snapshot does not hold yet (the engine stores a snapshot
// just after appending its changes to the feed, so the hub can be ahead).
// Changes up to c.base are then skipped by fanout.
func (h *Hub) sendSnapshot(c *conn, reason string) {
	s := h.state.Snapshot()
	at := h.now()
	f := h.snapshotFrame(c, s, at)
	var gap []calls.Change
	if s.Seq < h.last {
		if cs, ok := h.state.Feed().Since(s.Seq); ok {
			gap = cs
		}
	}
	c.base = max(s.Seq, h.last)
	c.mu.Lock()
	c.push(f)
	for i := range gap {
		if gap[i].Seq > h.last {
			break
		}
		var p prep
		h.prepare(&p, &gap[i], at)
		if g := h.frameFor(c, &p); g != nil {
			c.push(g)
		}
	}
	c.mu.Unlock()
	c.signal()
	h.m.snapshots.WithLabelValues(reason).Inc()
}

// resume queues the changes after since for c, when the feed still holds
// them all and they are few and recent enough; it reports whether it did.
func (h *Hub) resume(c *conn, since uint64) bool {
	if since > h.last {
		return false
	}
	cs, ok := h.state.Feed().Since(since)
	if !ok {
		return false
	}
	n := 0
	for n < len(cs) && cs[n].Seq <= h.last {
		n++
	}
	cs = cs[:n]
	if n > h.cfg.ReplayMax {
		return false
	}
	if n > 0 && cs[0].At < time.Now().Add(-h.cfg.ReplayMaxAge).UnixMilli() {
		return false
	}
	at := h.now()
	b := newPayload(64)
	b = append(b, `{"op":"resumed","since":`...)
	b = appendUint(b, since)
	b = append(b, `,"seq":`...)
	b = appendUint(b, h.last)
	b = append(b, '}')
	c.base = h.last
	c.mu.Lock()
	c.push(&frame{b: finish(b, opText), seq: since, at: at, msgs: 1})
	for i := range cs {
		var p prep
		h.prepare(&p, &cs[i], at)
		if f := h.frameFor(c, &p); f != nil {
			c.push(f)
		}
	}
	c.mu.Unlock()
	c.signal()
	h.m.resumes.Inc()
	return true
}
