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
	DefaultPingInterval  = 250 * time.Millisecond // with PingLate: a silent link is stale within 1 s
	DefaultPingLate      = 750 * time.Millisecond
	DefaultPingTimeout   = 3 * time.Second
	DefaultReconnectMin  = 250 * time.Millisecond
	DefaultReconnectMax  = 30 * time.Second
	DefaultReconnectFast = 500 * time.Millisecond
	DefaultFastFor       = 2 * time.Minute
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
	// action. Default 2 s; negative disables pings and the read-idle
	// deadline. With the defaults a half-open connection (bytes swallowed,
	// socket kept) is reported stalled within 2.75 s and dropped within 5 s.
	PingInterval time.Duration
	// PingLate is how long a Ping may stay unanswered before Next reports
	// LinkStalled: what was read may no longer be current. LinkResumed
	// follows if the answer comes after all. Default 750 ms, at most
	// PingTimeout.
	PingLate time.Duration
	// PingTimeout is how long a Ping may stay unanswered before the
	// connection is declared dead and dropped. Default 3 s. Behind it, the
	// socket has a read deadline of 2·PingInterval+PingTimeout, pushed back
	// at every answered Ping: a connection that reads nothing for that
	// long is dropped even if a Ping cannot be written.
	PingTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// connection attempts; each wait is drawn uniformly from [0, current cap]
	// ("full jitter"), the cap doubling from ReconnectMin up to ReconnectMax.
	// Defaults 250 ms and 30 s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// ReconnectFast caps the backoff while the PBX is likely restarting:
	// for FastFor after a logged-in connection dropped (Asterisk closes
	// the socket when it stops or restarts), so the bridge is back within
	// ReconnectFast of Asterisk listening again. A refused login ends the
	// fast phase: a PBX that refuses us is not hammered. Defaults 500 ms
	// and 2 min; a negative FastFor disables the fast phase.
	ReconnectFast time.Duration
	FastFor       time.Duration
	// MaxQueue is how many messages may wait for Next before the client gives
	// up on the connection: it drops it, counts an overflow and reconnects
	// (the consumer resynchronises after LinkUp anyway). The reading
	// goroutine never blocks on the consumer. Default 1,000,000.
	MaxQueue int
	// Reader sets the framing limits. Default: see ReaderConfig.
	Reader ReaderConfig

	// Log receives lifecycle and error logs. Default: discard. Malformed
	// input (see Junk) is logged at Warn, rate-limited: the first of each
	// kind at once, then a count at most every JunkLogEvery.
	Log *slog.Logger
	// JunkLogEvery is the period of those counts. Default 1 min.
	JunkLogEvery time.Duration
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
	LinkNone    LinkState = iota // an ordinary message
	LinkUp                       // logged in: every later message is from this connection
	LinkDown                     // the connection is gone; state may have been missed
	LinkStalled                  // a Ping is late: the connection may be half-open, state may be stale
	LinkResumed                  // the late Ping was answered: what was queued before is current again
)

func (l LinkState) String() string {
	switch l {
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	case LinkStalled:
		return "stalled"
	case LinkResumed:
		return "resumed"
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
	errReadIdle       = errors.New("nothing read within the keep-alive deadline")
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
	Connects   uint64        // successful logins
	Reconnects uint64        // successful logins after the first
	Failures   uint64        // connection attempts that did not reach login
	Overflows  uint64        // connections dropped because MaxQueue was reached
	PingFails  uint64        // connections dropped because a Ping went unanswered
	LatePings  uint64        // Pings unanswered after PingLate (LinkStalled reported)
	Messages   uint64        // frames read
	Garbage    uint64        // lines skipped by the reader
	Oversized  uint64        // connections dropped for a line or frame over the size limit
	Headerless uint64        // frames with neither Event nor Response, dropped
	PingRTT    time.Duration // round trip of the last answered Ping
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

	junk *junkLog

	stats struct {
		connects, reconnects, failures, overflows, pingFails, latePings atomic.Uint64
		messages, garbage, oversized, headerless                        atomic.Uint64
		pingRTT                                                         atomic.Int64
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
	def(&cfg.PingLate, min(DefaultPingLate, cfg.PingTimeout))
	cfg.PingLate = min(cfg.PingLate, cfg.PingTimeout)
	def(&cfg.ReconnectMin, DefaultReconnectMin)
	def(&cfg.ReconnectMax, DefaultReconnectMax)
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = cfg.ReconnectMin
	}
	def(&cfg.ReconnectFast, DefaultReconnectFast)
	cfg.ReconnectFast = min(cfg.ReconnectFast, cfg.ReconnectMax)
	def(&cfg.FastFor, DefaultFastFor)
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
	log = log.With("component", "ami")
	return &Client{
		cfg:     cfg,
		log:     log,
		junk:    newJunkLog(log, cfg.JunkLogEvery, nil),
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
		Overflows: s.overflows.Load(), PingFails: s.pingFails.Load(), LatePings: s.latePings.Load(),
		Messages: s.messages.Load(), Garbage: s.garbage.Load(), Oversized: s.oversized.Load(),
		Headerless: s.headerless.Load(), PingRTT: time.Duration(s.pingRTT.Load()),
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
