package ami

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultDialTimeout   = 5 * time.Second
	DefaultActionTimeout = 10 * time.Second
	DefaultPingInterval  = 20 * time.Second
	DefaultPingTimeout   = 5 * time.Second
	DefaultReconnectMin  = 250 * time.Millisecond
	DefaultReconnectMax  = 30 * time.Second
	DefaultMaxQueue      = 1_000_000
)

// Config configures a Client. The zero value of every field means its
// default.
type Config struct {
	// Addr is the manager address, "host:port". Default "127.0.0.1:5038".
	Addr string
	// TLS, when set, makes the client speak TLS (Asterisk's tlsbindport,
	// usually 5039). Default nil: plain TCP.
	TLS *tls.Config
	// Dial opens the connection instead of a net.Dialer (tests use it to run
	// over net.Pipe). Default nil: TCP to Addr, within DialTimeout.
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	// Username and Secret are the manager.conf credentials. The secret is
	// never logged.
	Username string
	Secret   string
	// MD5 logs in with the Challenge/MD5 flow (Key = md5(challenge+secret)),
	// so the secret never crosses the wire. Default false: plain Secret.
	MD5 bool
	// Events is the Events header of Login: "on", "off" or a class list such
	// as "call,system". Default "on".
	Events string

	// DialTimeout bounds the TCP (and TLS) connect. Default 5 s.
	DialTimeout time.Duration
	// ActionTimeout is the deadline of a Do whose ctx has none, and of the
	// banner and login exchange. Default 10 s.
	ActionTimeout time.Duration
	// PingInterval is how often the connection is probed with a Ping
	// action. Default 20 s; negative disables pings.
	PingInterval time.Duration
	// PingTimeout is how long a Ping may stay unanswered before the
	// connection is declared dead and dropped. Default 5 s.
	PingTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// connection attempts; each wait is drawn uniformly from [0, current cap]
	// ("full jitter"), the cap doubling from ReconnectMin up to ReconnectMax.
	// Defaults 250 ms and 30 s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// MaxQueue is how many messages may wait for Next before the client gives
	// up on the connection: it drops it, counts an overflow and reconnects
	// (the consumer resynchronises after LinkUp anyway). The reading
	// goroutine never blocks on the consumer. Default 1,000,000.
	MaxQueue int
	// Reader sets the framing limits. Default: see ReaderConfig.
	Reader ReaderConfig

	// Log receives lifecycle and error logs. Default: discard.
	Log *slog.Logger
	// Record, when set, receives every byte read from the socket, banner
	// included, exactly as received (for --record-ami). It is written from
	// the reading goroutine, so it should be quick. If it also has a method
	// NewConn() error (as *Recorder does), that is called before each new
	// connection's first byte, so each connection can start its own file.
	Record io.Writer
	// Rand draws the backoff jitter. Default: a generator seeded at random.
	Rand *rand.Rand
}

// LinkState marks the items of Next that are not messages.
type LinkState uint8

const (
	LinkNone LinkState = iota // an ordinary message
	LinkUp                    // logged in: every later message is from this connection
	LinkDown                  // the connection is gone; state may have been missed
)

func (l LinkState) String() string {
	switch l {
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	}
	return "none"
}

// Event is one item returned by Next: a message (Link == LinkNone) or a link
// marker with an empty Msg.
type Event struct {
	Msg  Message
	Link LinkState
}

// Response is the answer to an action. For a list action (Asterisk answered
// "EventList: start"), Items holds every event of the list in order, the
// completing event ("EventList: Complete") last.
type Response struct {
	Message
	Items []Message
}

// ActionError means Asterisk answered "Response: Error". Callers may retry
// the action; the connection is fine.
type ActionError struct {
	Action  string // the action's name
	Message string // Asterisk's Message header
}

func (e *ActionError) Error() string {
	return fmt.Sprintf("ami: %s: %s", e.Action, e.Message)
}

var (
	// ErrNotConnected is returned by Do when no logged-in connection exists.
	// Actions are never queued for a later connection.
	ErrNotConnected = errors.New("ami: not connected")
	// ErrConnectionLost is returned by Do when the connection dropped before
	// the answer arrived; the action may or may not have been executed.
	ErrConnectionLost = errors.New("ami: connection lost")
	errOverflow       = errors.New("event queue overflow")
	errPingTimeout    = errors.New("ping timeout")
)

// IsTimeout reports whether err means an action or the network did not
// answer in time.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ClientStats counts what a Client has done. Counters only grow.
type ClientStats struct {
	Connects   uint64 // successful logins
	Reconnects uint64 // successful logins after the first
	Failures   uint64 // connection attempts that did not reach login
	Overflows  uint64 // connections dropped because MaxQueue was reached
	PingFails  uint64 // connections dropped because a Ping went unanswered
	Messages   uint64 // frames read
	Garbage    uint64 // lines skipped by the reader
	Oversized  uint64 // frames dropped by the reader for their size
}

// Client is a reconnecting AMI client. Run owns the connection; Next hands
// the event stream to one consumer; Do may be called from any number of
// goroutines at once and pipelines the actions on the one connection.
//
// Typical use:
//
//	c := ami.NewClient(ami.Config{Addr: "pbx:5038", Username: "u", Secret: "s"})
//	go c.Run(ctx)
//	for {
//		evs, err := c.Next(ctx) // LinkUp, messages..., LinkDown, LinkUp, ...
//		...
//	}
type Client struct {
	// Immutable after NewClient.
	cfg    Config
	log    *slog.Logger
	prefix string // ActionID prefix, unique per client

	seq     atomic.Uint64
	running atomic.Bool

	mu  sync.Mutex // guards cur
	cur *conn      // the logged-in connection, nil when down

	qmu    sync.Mutex // guards queue
	queue  []Event
	notify chan struct{} // cap 1: queue became non-empty

	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	runDone   chan struct{} // closed when Run returns

	randMu sync.Mutex // guards cfg.Rand

	stats struct {
		connects, reconnects, failures, overflows, pingFails atomic.Uint64
		messages, garbage, oversized                         atomic.Uint64
	}
}

// NewClient returns a client; nothing happens until Run.
func NewClient(cfg Config) *Client {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:5038"
	}
	if cfg.Events == "" {
		cfg.Events = "on"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.DialTimeout, DefaultDialTimeout)
	def(&cfg.ActionTimeout, DefaultActionTimeout)
	def(&cfg.PingInterval, DefaultPingInterval)
	def(&cfg.PingTimeout, DefaultPingTimeout)
	def(&cfg.ReconnectMin, DefaultReconnectMin)
	def(&cfg.ReconnectMax, DefaultReconnectMax)
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = cfg.ReconnectMin
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		cfg:     cfg,
		log:     log.With("component", "ami"),
		prefix:  strconv.FormatUint(rand.Uint64()&0xffffffff, 36),
		notify:  make(chan struct{}, 1),
		closing: make(chan struct{}),
		runDone: make(chan struct{}),
	}
}

// Connected reports whether a logged-in connection is up right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// Stats returns the counters so far. Safe for concurrent use.
func (c *Client) Stats() ClientStats {
	s := &c.stats
	return ClientStats{
		Connects: s.connects.Load(), Reconnects: s.reconnects.Load(), Failures: s.failures.Load(),
		Overflows: s.overflows.Load(), PingFails: s.pingFails.Load(),
		Messages: s.messages.Load(), Garbage: s.garbage.Load(), Oversized: s.oversized.Load(),
	}
}

// Close stops Run as if its ctx were cancelled and waits for it to return.
// It is idempotent; after Close, Run returns at once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	if c.running.Load() {
		<-c.runDone
	}
	return nil
}

// Run connects, logs in and reads until ctx is done (or Close is called),
// reconnecting with backoff after any failure. It sends Logoff before
// leaving a live connection and returns ctx.Err(). Call it once.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("ami: run: already running")
	}
	defer close(c.runDone)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() { // owned: ends when ctx ends, which the deferred cancel ensures
		defer wg.Done()
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	attempt := 0
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		loggedIn, err := c.runConn(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if loggedIn && !errors.Is(err, errOverflow) {
			attempt = 0 // the link worked: start the backoff over
		}
		wait := c.backoff(attempt)
		attempt++
		c.log.Warn("ami disconnected", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// backoff returns a wait drawn from [0, min(max, min*2^attempt)].
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.cfg.ReconnectMin
	for i := 0; i < attempt && ceil < c.cfg.ReconnectMax; i++ {
		ceil *= 2
	}
	ceil = min(ceil, c.cfg.ReconnectMax)
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return time.Duration(c.cfg.Rand.Int64N(int64(ceil) + 1))
}

// push queues ev for Next. Link markers always fit; a message does not fit
// once MaxQueue messages wait, and push reports false.
func (c *Client) push(ev Event, force bool) bool {
	c.qmu.Lock()
	if !force && len(c.queue) >= c.cfg.MaxQueue {
		c.qmu.Unlock()
		return false
	}
	c.queue = append(c.queue, ev)
	c.qmu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true
}

// Next blocks until at least one item is queued and returns every queued
// item, in wire order. Apply them as one batch. Only one goroutine may call
// Next at a time.
func (c *Client) Next(ctx context.Context) ([]Event, error) {
	for {
		c.qmu.Lock()
		if len(c.queue) > 0 {
			evs := c.queue
			c.queue = nil
			c.qmu.Unlock()
			return evs, nil
		}
		c.qmu.Unlock()
		select {
		case <-c.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
