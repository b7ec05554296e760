package sio

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	engine "github.com/zishang520/socket.io/servers/engine/v3"
	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Paths are where NethCTI's clients open socket.io: phone-island and the
// web app at /api/ws (nethcti-middleware's path), the legacy clients at
// the default /socket.io. Mount the Server at both.
var Paths = []string{"/api/ws/", "/socket.io/"}

// State is what the server reads; *calls.Engine satisfies it. Both
// methods must be safe to call from any goroutine and never return nil.
type State interface {
	Snapshot() *calls.Snapshot
	Feed() *calls.Feed
}

// Authenticator checks a socket login: the token the client gives with
// the name it logs in as (accessKeyId: a username, or, as NethCTI
// accepts, one of the user's extensions). It returns whom the token
// stands for, or an error: the client is then told 401. NativeLogin is
// one over ctibridge's own tokens; the NethCTI REST front's credentials
// (its JWT, the legacy user:token, the persistent tokens) come with the
// front (cmd/ctibridge wires one over nethcti.Front.CheckToken).
type Authenticator interface {
	CheckLogin(accessKeyID, token string) (Login, error)
}

// Login is what an Authenticator says of a login it accepts.
type Login struct {
	User *auth.User
	// Expires is when the token ends (zero: never); the client is then
	// told 401 and disconnected.
	Expires time.Time
	// Session, when not "", is the native session the token stands on:
	// the Revoker is asked to watch it. "" for a token that no session
	// backs (a persistent token).
	Session string
}

// Revoker, when the Authenticator also implements it (NativeLogin does),
// tells the server when a login's session (Login.Session) ends before its
// expiry: the client is then told 401 and disconnected, as on expiry.
// OnRevoke calls f once, from any goroutine; stop ends the watch.
// *auth.Service's OnRevoke is one.
type Revoker interface {
	OnRevoke(session string, f func()) (stop func())
}

// Directory names the user of an extension: NethCTI's clients key
// everything by username (extenUpdate's "username", the main presence of
// a user's main extension, its first). UsersDirectory is one over the
// users ctibridge knows.
type Directory interface {
	UserOf(exten string) (*auth.User, bool)
}

// Defaults of Config.
const (
	// NethCTI's own: the engine.io ping every 25 s, and 8 s for a
	// client told takeOver to acknowledge before the new login goes on.
	DefaultPingInterval = 25 * time.Second
	DefaultPingTimeout  = 20 * time.Second
	DefaultTakeOverWait = 8 * time.Second
	DefaultLoginTimeout = 30 * time.Second
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// PingInterval and PingTimeout are engine.io's heartbeat: a client
	// that does not answer a ping within PingTimeout is dropped.
	// Defaults 25 s and 20 s.
	PingInterval, PingTimeout time.Duration
	// TakeOverWait is how long a second login of the same user and
	// uaType waits for the first client, told takeOver, to answer
	// takeOverAck; then the login goes on regardless. Default 8 s.
	TakeOverWait time.Duration
	// LoginTimeout: a socket that has not logged in by then is closed.
	// Default 30 s.
	LoginTimeout time.Duration
	// Log receives lifecycle lines and refused logins. Default: discard.
	Log *slog.Logger
}

// Server serves socket.io to NethCTI's clients: it is an http.Handler
// (mount it at Paths), and Run projects the engine's feed to the clients
// logged in.
type Server struct {
	// Immutable after New.
	cfg   Config
	state State
	auth  Authenticator
	dir   Directory
	log   *slog.Logger
	io    *socket.Server
	eio   http.Handler

	mu      sync.Mutex // guards clients; list is its copy for the fan-out
	clients map[*client]struct{}
	list    atomic.Pointer[[]*client]

	joining sync.Map // *socket.Socket -> chan struct{}: joinWait
	running atomic.Bool
	// Owned by Run (and by the tests that drive pump themselves).
	proj projector
	now  func() time.Time // the parking's seconds left; tests set it
}

// New returns a server projecting state's feed to the clients that log in
// through a. Call Run to start the projection.
func New(state State, a Authenticator, dir Directory, cfg Config) (*Server, error) {
	if state == nil || a == nil || dir == nil {
		return nil, errors.New("sio: state, authenticator and directory are required")
	}
	cfg.PingInterval = cmp.Or(cfg.PingInterval, DefaultPingInterval)
	cfg.PingTimeout = cmp.Or(cfg.PingTimeout, DefaultPingTimeout)
	cfg.TakeOverWait = cmp.Or(cfg.TakeOverWait, DefaultTakeOverWait)
	cfg.LoginTimeout = cmp.Or(cfg.LoginTimeout, DefaultLoginTimeout)
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, state: state, auth: a, dir: dir, log: log, clients: map[*client]struct{}{}, now: time.Now}
	s.list.Store(new([]*client))
	s.proj.init(dir)

	opts := socket.DefaultServerOptions()
	opts.SetServeClient(false)
	// The clients use the websocket transport only (phone-island sets
	// transports: ['websocket'], as NethCTI served): no long-polling.
	opts.SetTransports(types.NewSet[engine.TransportCtor](&wsBuilder{}))
	opts.SetAllowUpgrades(false)
	opts.SetPingInterval(cfg.PingInterval)
	opts.SetPingTimeout(cfg.PingTimeout)
	// What a client sends is small (login, ping, takeOverAck).
	opts.SetMaxHttpBufferSize(64 << 10)
	s.io = socket.NewServer(nil, opts)
	s.eio = s.io.ServeHandler(nil)
	s.io.Use(s.joinWait)
	if err := s.io.On("connection", s.onConnection); err != nil {
		return nil, err
	}
	return s, nil
}

// joinWait holds the connection's reader until the socket has joined
// the namespace. The library answers a client's CONNECT ("40{sid}")
// before it files the socket under the namespace, in another goroutine:
// a client that sends at once (socket.io-client emits login on
// "connect") could be read in between, and the library then drops the
// connection ("invalid state"). The middleware runs on the reader; the
// join ends in onConnection, which releases it.
func (s *Server) joinWait(sock *socket.Socket, next func(*socket.ExtendedError)) {
	joined := make(chan struct{})
	s.joining.Store(sock, joined)
	next(nil)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-joined:
	case <-t.C:
		s.joining.Delete(sock)
	}
}

// ServeHTTP serves the engine.io handshake and websocket of a client.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.eio.ServeHTTP(w, r) }

// Run projects the engine's feed to the logged-in clients until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("sio: Run called twice")
	}
	s.proj.reset(s.state.Snapshot())
	for {
		feed := s.state.Feed()
		wake := feed.Wait()
		s.pump(feed)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// Close disconnects every client and stops serving.
func (s *Server) Close() { s.io.Close(nil) }

// ToUser sends the event name with args to every client logged in as
// username: the per-user events another part of the server tells
// (updateDefaultDevice, from the REST front). Safe for concurrent use.
func (s *Server) ToUser(username, name string, args ...any) {
	for _, c := range *s.list.Load() {
		if v := c.view.Load(); v != nil && v.user.Username == username {
			c.emit(name, args...)
		}
	}
}

// Clients is how many clients are logged in.
func (s *Server) Clients() int { return len(*s.list.Load()) }

// add and remove keep the logged-in clients; the fan-out reads list.
func (s *Server) add(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c] = struct{}{}
	s.publishList()
}

func (s *Server) remove(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[c]; !ok {
		return
	}
	delete(s.clients, c)
	s.publishList()
}

func (s *Server) publishList() {
	l := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		l = append(l, c)
	}
	s.list.Store(&l)
}
