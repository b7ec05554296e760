package sio

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"
)

// client is one socket, logged in or not yet.
type client struct {
	s    *Server
	sock *socket.Socket
	// sink, when set (tests), takes the client's packets instead of the
	// socket.
	sink func(*packet)

	view atomic.Pointer[view] // nil until logged in

	mu       sync.Mutex    // guards what follows
	pending  bool          // a login is on its way (waiting for a takeOverAck)
	gone     bool          // disconnected
	tookOver chan struct{} // closed by its takeOverAck
	done     chan struct{} // closed when it disconnects
	stops    []func()      // the expiry timer, the revocation watch
}

// onConnection sets a new socket's handlers: login, ping (acknowledged,
// as phone-island checks the link with it every 5 s), takeOverAck.
func (s *Server) onConnection(args ...any) {
	sock, ok := args[0].(*socket.Socket)
	if !ok {
		return
	}
	if joined, ok := s.joining.LoadAndDelete(sock); ok {
		defer close(joined.(chan struct{}))
	}
	c := &client{s: s, sock: sock, tookOver: make(chan struct{}), done: make(chan struct{})}
	idle := time.AfterFunc(s.cfg.LoginTimeout, func() {
		if c.view.Load() == nil {
			s.log.Info("sio: no login in time", "sid", sock.Id())
			sock.Disconnect(true)
		}
	})
	sock.On("login", func(a ...any) { c.login(a) })
	sock.On("ping", func(a ...any) {
		if len(a) > 0 {
			if ack, ok := a[len(a)-1].(socket.Ack); ok {
				ack(nil, nil)
			}
		}
	})
	sock.On("takeOverAck", func(...any) {
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-c.tookOver:
		default:
			close(c.tookOver)
		}
	})
	sock.On("disconnect", func(...any) {
		idle.Stop()
		c.drop()
	})
}

// errLogin is a login whose body is not NethCTI's {accessKeyId, token,
// uaType?}, uaType "mobile" or "desktop".
var errLogin = errors.New("sio: bad login request")

// login checks {accessKeyId, token, uaType}: authe_ok, or 401 and a
// disconnect, as NethCTI answers. A second login of the same user with the
// same uaType first tells the other client takeOver, and waits for its
// takeOverAck (at most Config.TakeOverWait).
func (c *client) login(a []any) {
	key, token, ua, err := loginArgs(a)
	var l Login
	if err == nil {
		l, err = c.s.auth.CheckLogin(key, token)
	}
	if err != nil {
		c.s.log.Info("sio: login refused", "sid", c.sock.Id(), "user", key, "err", err)
		c.refuse()
		return
	}
	c.mu.Lock()
	if c.pending || c.gone {
		c.mu.Unlock()
		return
	}
	c.pending = true
	c.mu.Unlock()
	others := c.s.sameLogin(c, l.User.Username, ua)
	if len(others) == 0 {
		c.admit(l, ua)
		return
	}
	c.s.log.Info("sio: second login: takeOver", "user", l.User.Username, "uaType", ua, "others", len(others))
	for _, o := range others {
		o.emit("takeOver")
	}
	// The wait ends within TakeOverWait, or when c goes.
	go func() {
		t := time.NewTimer(c.s.cfg.TakeOverWait)
		defer t.Stop()
		for _, o := range others {
			select {
			case <-o.tookOver:
			case <-o.done:
			case <-t.C:
				c.admit(l, ua)
				return
			case <-c.done:
				return
			}
		}
		c.admit(l, ua)
	}()
}

// loginArgs reads a login's body.
func loginArgs(a []any) (key, token, ua string, err error) {
	if len(a) == 0 {
		return "", "", "", errLogin
	}
	m, ok := a[0].(map[string]any)
	if !ok {
		return "", "", "", errLogin
	}
	key, _ = m["accessKeyId"].(string)
	token, _ = m["token"].(string)
	if key == "" || token == "" {
		return "", "", "", errLogin
	}
	// NethCTI refuses a uaType string other than these two and ignores
	// one that is no string.
	if s, ok := m["uaType"].(string); ok {
		if s != "mobile" && s != "desktop" {
			return "", "", "", errLogin
		}
		ua = s
	}
	return key, token, ua, nil
}

// sameLogin lists the logged-in clients other than c of user with uaType
// ua (none when ua is "": NethCTI takes over only a typed login).
func (s *Server) sameLogin(c *client, user, ua string) []*client {
	if ua == "" {
		return nil
	}
	var out []*client
	for _, o := range *s.list.Load() {
		if o == c {
			continue
		}
		if v := o.view.Load(); v != nil && v.user.Username == user && v.uaType == ua {
			out = append(out, o)
		}
	}
	return out
}

// admit logs c in: the events from the feed, and authe_ok, until the
// token expires or its session is revoked.
func (c *client) admit(l Login, ua string) {
	s := c.s
	c.mu.Lock()
	c.pending = false
	if c.gone {
		c.mu.Unlock()
		return
	}
	old := c.stops
	c.stops = nil
	c.view.Store(newView(l.User, ua))
	// Filed for the fan-out before authe_ok goes out, so that every
	// change made once the client has it reaches it (an event may come
	// just before authe_ok: harmless, the client reads the state after
	// it). Under c.mu: drop, which marks c gone under it, then removes
	// it; and before the expiry and revocation, whose end removes it.
	s.add(c)
	if !l.Expires.IsZero() {
		t := time.AfterFunc(time.Until(l.Expires), func() { c.end("token expired") })
		c.stops = append(c.stops, func() { t.Stop() })
	}
	if r, ok := s.auth.(Revoker); ok && l.Session != "" {
		c.stops = append(c.stops, r.OnRevoke(l.Session, func() { c.end("session revoked") }))
	}
	c.mu.Unlock()
	for _, stop := range old {
		stop()
	}
	c.emit("authe_ok", map[string]any{"message": "authorized successfully"})
	s.log.Info("sio: logged in", "sid", c.sock.Id(), "user", l.User.Username, "uaType", ua)
}

// end logs c out when its token ends: 401, then a disconnect.
func (c *client) end(why string) {
	c.s.log.Info("sio: logged out", "sid", c.sock.Id(), "why", why)
	c.s.remove(c)
	c.refuse()
}

// refuse answers 401 and disconnects, as NethCTI does.
func (c *client) refuse() {
	c.emit("401", map[string]any{"message": "unauthorized access"})
	c.sock.Disconnect(false)
}

// drop forgets a disconnected client.
func (c *client) drop() {
	c.mu.Lock()
	if !c.gone {
		close(c.done)
	}
	c.gone = true
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	c.s.remove(c)
}

func (c *client) emit(ev string, args ...any) {
	if c.sink != nil {
		c.sink(newEventPacket(ev, args...))
		return
	}
	if err := c.sock.Emit(ev, args...); err != nil {
		c.s.log.Warn("sio: emit", "event", ev, "err", err)
	}
}
