package ami

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of ServerConfig.
const (
	DefaultBanner     = "Asterisk Call Manager/11.0.0"
	DefaultQueueSize  = 10000
	DefaultMaxGarbage = 100
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("ami: server closed")

// ServerConfig configures a Server. The zero value of every field means its
// default.
type ServerConfig struct {
	// Banner is the greeting line sent on connect, without CRLF.
	// Default "Asterisk Call Manager/11.0.0" (Asterisk 22's).
	Banner string
	// Users maps usernames to secrets; Login accepts plain Secret and the
	// Challenge/MD5 Key. Default empty: every login fails.
	Users map[string]string
	// Log receives lifecycle logs. Default: discard.
	Log *slog.Logger
	// QueueSize is how many frames may wait to be written to one session. A
	// session whose queue is full is disconnected: a slow client never blocks
	// Broadcast or other sessions. Default 10000.
	QueueSize int
	// MaxGarbage is how many garbage lines plus oversized frames a session
	// may send before it is disconnected. Default 100.
	MaxGarbage int
	// Reader sets the framing limits for what clients send.
	Reader ReaderConfig
	// Started is when the simulated PBX booted, for FullyBooted's Uptime
	// and LastReload (a server never reloads). Default: when NewServer was
	// called.
	Started time.Time
	// Trace, when set, is called with every frame a session receives, before
	// it is handled, on that session's reading goroutine (tests record the
	// actions a client sent with it).
	Trace func(s *Session, m Message)
}

// HandlerFunc answers one action. It returns the frames to send back, in
// order: the response and, for a list action, the list's events; the server
// sets their ActionID to the request's. Returning nil sends nothing (the
// handler may answer later with Session.Send). Handlers of one session run
// one at a time, in the order the actions arrived, on the session's reading
// goroutine; ctx ends when the session does.
type HandlerFunc func(ctx context.Context, s *Session, req Message) []Message

// ServerStats counts what a Server has done.
type ServerStats struct {
	Accepted  uint64 // sessions accepted
	Active    int    // sessions open now
	Slow      uint64 // sessions dropped because their queue was full
	Garbage   uint64 // sessions dropped for sending garbage
	LoginFail uint64 // failed logins
}

// Server is the server side of AMI: it greets, authenticates and dispatches
// actions to handlers, and broadcasts events to logged-in sessions. It is
// used by tests and by the simulated PBX. All methods are safe for
// concurrent use.
type Server struct {
	// Immutable after NewServer.
	cfg ServerConfig
	log *slog.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every session and Serve goroutine

	mu        sync.Mutex // guards the fields below
	handlers  map[string]HandlerFunc
	listeners map[net.Listener]struct{}
	sessions  map[*Session]struct{}
	closed    bool

	accepted, slow, garbage, loginFail atomic.Uint64
}

// NewServer returns a server with the built-in actions Login, Challenge,
// Logoff and Ping.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Banner == "" {
		cfg.Banner = DefaultBanner
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxGarbage <= 0 {
		cfg.MaxGarbage = DefaultMaxGarbage
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, log: log.With("component", "ami-server"),
		ctx: ctx, cancel: cancel,
		handlers:  map[string]HandlerFunc{},
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*Session]struct{}{},
	}
}

// Handle sets the handler of an action (case-insensitive). It may replace a
// built-in one, Login included; such a Login handler marks the session
// logged in with Session.Authorize.
func (srv *Server) Handle(action string, h HandlerFunc) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.handlers[strings.ToLower(action)] = h
}

// Stats returns the counters so far.
func (srv *Server) Stats() ServerStats {
	srv.mu.Lock()
	n := len(srv.sessions)
	srv.mu.Unlock()
	return ServerStats{Accepted: srv.accepted.Load(), Active: n, Slow: srv.slow.Load(),
		Garbage: srv.garbage.Load(), LoginFail: srv.loginFail.Load()}
}

// Addr is the address of the first listener still open, or nil.
func (srv *Server) Addr() net.Addr {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for l := range srv.listeners {
		return l.Addr()
	}
	return nil
}

// ListenAndServe listens on addr ("host:port") and serves until ctx ends or
// Close is called; then it closes the server and returns ctx.Err() or
// ErrServerClosed.
func (srv *Server) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ami: listen: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err = srv.Serve(l)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Serve accepts connections on l until Close, serving each in its own
// goroutines, and returns ErrServerClosed after Close.
func (srv *Server) Serve(l net.Listener) error {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	srv.listeners[l] = struct{}{}
	srv.mu.Unlock()
	defer func() {
		srv.mu.Lock()
		delete(srv.listeners, l)
		srv.mu.Unlock()
		l.Close()
	}()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if srv.ctx.Err() != nil {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("ami: accept: %w", err)
		}
		delay = 0
		srv.ServeConn(nc)
	}
}

// ServeConn serves one already-open connection (a net.Pipe end in tests) in
// new goroutines and returns at once. The server owns nc from then on.
func (srv *Server) ServeConn(nc net.Conn) *Session {
	ctx, cancel := context.WithCancel(srv.ctx)
	s := &Session{srv: srv, nc: nc, ctx: ctx, cancel: cancel,
		out: make(chan outFrame, srv.cfg.QueueSize), done: make(chan struct{})}
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		cancel()
		nc.Close()
		return s
	}
	srv.sessions[s] = struct{}{}
	srv.wg.Add(2)
	srv.mu.Unlock()
	srv.accepted.Add(1)
	s.out <- outFrame{b: []byte(srv.cfg.Banner + "\r\n")} // the queue is empty: never blocks
	go func() {
		defer srv.wg.Done()
		s.writeLoop()
	}()
	go func() {
		defer srv.wg.Done()
		s.readLoop()
		s.Close()
		srv.mu.Lock()
		delete(srv.sessions, s)
		srv.mu.Unlock()
	}()
	return s
}

// Sessions returns the open sessions.
func (srv *Server) Sessions() []*Session {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	out := make([]*Session, 0, len(srv.sessions))
	for s := range srv.sessions {
		out = append(out, s)
	}
	return out
}

// Broadcast sends m to every logged-in session whose event mask (login's
// Events header, the Events action) holds every class of m's Privilege
// header, as Asterisk filters. It never blocks: a session whose queue is
// full is disconnected.
func (srv *Server) Broadcast(m Message) error {
	b, err := AppendMessage(nil, m)
	if err != nil {
		return fmt.Errorf("ami: broadcast: %w", err)
	}
	class := eventClass(m.Get("Privilege"))
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for s := range srv.sessions {
		if mask := s.events.Load(); s.loggedIn.Load() && mask != 0 && mask&class == class {
			s.enqueue(outFrame{b: b})
		}
	}
	return nil
}

// Close closes the listeners and every session and waits for their
// goroutines. It is idempotent.
func (srv *Server) Close() error {
	srv.mu.Lock()
	srv.closed = true
	srv.cancel()
	for l := range srv.listeners {
		l.Close()
	}
	for s := range srv.sessions {
		s.nc.Close()
	}
	srv.mu.Unlock()
	srv.wg.Wait()
	return nil
}

// outFrame is one item of a session's write queue.
type outFrame struct {
	b     []byte
	raw   bool // flush right after, as its own writes of chunk bytes
	chunk int
	close bool // flush and close the connection (after Goodbye)
}

// Session is one client connection of a Server. Its methods are safe for
// concurrent use.
type Session struct {
	// Immutable after ServeConn.
	srv    *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan outFrame
	done   chan struct{}

	closeOnce sync.Once
	loggedIn  atomic.Bool
	events    atomic.Uint32 // the classes of events sent (0: none)
	user      atomic.Pointer[string]

	// Owned by the reading goroutine.
	challenge string
}

// RemoteAddr is the client's address.
func (s *Session) RemoteAddr() net.Addr { return s.nc.RemoteAddr() }

// User is the logged-in username, or "".
func (s *Session) User() string {
	if u := s.user.Load(); u != nil {
		return *u
	}
	return ""
}

// LoggedIn reports whether the session has logged in.
func (s *Session) LoggedIn() bool { return s.loggedIn.Load() }

// Authorize marks the session logged in as user, with events on or off.
// Only a Login handler replacing the built-in one needs it.
func (s *Session) Authorize(user string, events bool) {
	s.user.Store(&user)
	var mask uint32
	if events {
		mask = allClasses
	}
	s.events.Store(mask)
	s.loggedIn.Store(true)
}

// Send queues m for this session. It never blocks; when the queue is full
// the session is disconnected and Send returns an error.
func (s *Session) Send(m Message) error {
	if m.Len() == 0 {
		return nil
	}
	b, err := AppendMessage(nil, m)
	if err != nil {
		return fmt.Errorf("ami: send: %w", err)
	}
	return s.enqueue(outFrame{b: b})
}

// SendRaw queues bytes to be written as they are, flushed in writes of at
// most chunk bytes each (chunk <= 0: one write). It serves to replay
// recordings byte for byte and to exercise split reads.
func (s *Session) SendRaw(b []byte, chunk int) error {
	return s.enqueue(outFrame{b: b, chunk: chunk, raw: true})
}

var errSessionSlow = errors.New("ami: session queue full")

func (s *Session) enqueue(f outFrame) error {
	select {
	case <-s.done:
		return net.ErrClosed
	default:
	}
	select {
	case s.out <- f:
		return nil
	default:
		s.srv.slow.Add(1)
		s.srv.log.Warn("ami session too slow: dropping it", "remote", s.nc.RemoteAddr().String(), "queue", cap(s.out))
		s.Close()
		return errSessionSlow
	}
}

// Close disconnects the session. It is idempotent and does not wait.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.cancel()
		s.nc.Close()
	})
	return nil
}

// writeLoop drains the queue, writing whatever is queued in one syscall.
func (s *Session) writeLoop() {
	bw := bufio.NewWriterSize(s.nc, 32<<10)
	for {
		var f outFrame
		select {
		case <-s.done:
			return
		case f = <-s.out:
		}
		for {
			if f.close {
				bw.Flush()
				s.Close()
				return
			}
			if f.raw {
				if !s.writeRaw(bw, f) {
					return
				}
			} else if _, err := bw.Write(f.b); err != nil {
				s.Close()
				return
			}
			select {
			case f = <-s.out:
				continue
			default:
			}
			break
		}
		if bw.Flush() != nil {
			s.Close()
			return
		}
	}
}

func (s *Session) writeRaw(bw *bufio.Writer, f outFrame) bool {
	if bw.Flush() != nil {
		s.Close()
		return false
	}
	b := f.b
	for len(b) > 0 {
		n := len(b)
		if f.chunk > 0 {
			n = min(n, f.chunk)
		}
		if _, err := s.nc.Write(b[:n]); err != nil {
			s.Close()
			return false
		}
		b = b[n:]
	}
	return true
}

func (s *Session) readLoop() {
	rc := s.srv.cfg.Reader
	rc.MaxGarbage = s.srv.cfg.MaxGarbage
	r := NewReader(bufio.NewReader(s.nc), rc)
	for {
		m, err := r.ReadMessage()
		if st := r.Stats(); st.Garbage+st.Oversized > uint64(s.srv.cfg.MaxGarbage) {
			s.srv.garbage.Add(1)
			s.srv.log.Warn("ami session sends garbage: dropping it", "remote", s.nc.RemoteAddr().String())
			return
		}
		if err != nil {
			return
		}
		if s.srv.cfg.Trace != nil {
			s.srv.cfg.Trace(s, m)
		}
		if !s.handle(m) {
			return
		}
	}
}

// handle answers one frame and reports whether the session goes on.
func (s *Session) handle(req Message) bool {
	name := req.Get("Action") // any header may come first: amigo writes them in random order
	if name == "" {
		if req.Len() > 0 {
			s.reply(req, []Message{errorResp("Missing action in request")})
		}
		return true
	}
	lname := strings.ToLower(name)
	s.srv.mu.Lock()
	h := s.srv.handlers[lname]
	s.srv.mu.Unlock()

	var resp []Message
	switch {
	case h != nil && (s.loggedIn.Load() || lname == "login" || lname == "challenge"):
		resp = h(s.ctx, s, req)
	case lname == "login":
		return s.login(req)
	case lname == "challenge":
		resp = []Message{s.challengeResp(req)}
	case lname == "logoff":
		s.reply(req, []Message{NewMessage(Header{"Response", "Goodbye"}, Header{"Message", "Thanks for all the fish."})})
		s.enqueue(outFrame{close: true})
		return true // the writer closes the connection after the Goodbye
	case !s.loggedIn.Load():
		// Asterisk's manager.c answers any other action before login so.
		resp = []Message{errorResp("Permission denied")}
	case lname == "events":
		// manager.c's action_events: EventMask as at login; the answer
		// says only whether some class is on.
		mask := eventMask(req.Get("EventMask"))
		s.events.Store(mask)
		state := "Off"
		if mask != 0 {
			state = "On"
		}
		resp = []Message{NewMessage(Header{"Response", "Success"}, Header{"Events", state})}
	case lname == "ping":
		now := time.Now()
		resp = []Message{NewMessage(Header{"Response", "Success"}, Header{"Ping", "Pong"},
			Header{"Timestamp", fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)})}
	default:
		resp = []Message{errorResp("Invalid/unknown command: " + name + ". Use Action: ListCommands to show available commands.")}
	}
	s.reply(req, resp)
	return true
}

func errorResp(text string) Message {
	return NewMessage(Header{"Response", "Error"}, Header{"Message", text})
}

// reply sends resp with the request's ActionID, which goes right after the
// first header as Asterisk puts it.
func (s *Session) reply(req Message, resp []Message) {
	id, hasID := req.Lookup("ActionID")
	for _, m := range resp {
		if hasID {
			m = withActionID(m, id)
		}
		if err := s.Send(m); err != nil {
			return
		}
	}
}

func withActionID(m Message, id string) Message {
	if _, ok := m.Lookup("ActionID"); ok {
		return m.Set("ActionID", id)
	}
	if m.Len() == 0 {
		return m
	}
	return m.Insert(1, "ActionID", id)
}
