package ws

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/auth"
)

// conn is one client connection: its reader is the ServeHTTP goroutine,
// its writer a goroutine of its own, and between them and the hub a queue
// that keeps at most the latest frame per entity.
type conn struct {
	// Immutable once ServeHTTP has authenticated the client (before the
	// hub sees the conn).
	h           *Hub
	ws          *websocket.Conn
	nc          *lockedConn
	user        *auth.User
	full        bool // sees everything: admin or operator_panel
	seesUnowned bool // sees trunk, queue and parked calls
	wake        chan struct{}
	dead        chan struct{} // closed when the connection ends: stops the writer

	// Owned by the hub goroutine.
	slot       int // index in Hub.clients, -1 when not there
	topics     uint8
	subscribed bool
	base       uint64 // changes up to this seq are in what was sent

	mu      sync.Mutex // guards the fields below
	q       []*frame   // in seq order; nil where a newer frame replaced one
	spare   []*frame   // the writer's last batch, emptied, for reuse
	live    int        // non-nil entries of q
	idx     map[uint32]int32
	indexed bool   // idx holds q's positions (only for long queues)
	closing []byte // the close frame: once set, nothing more is queued
	reason  string // why the connection ended (metrics label)
	expiry  *time.Timer

	// Owned by the writer.
	iov       [][]byte
	bufs      net.Buffers
	lastWrite time.Time
	timer     *time.Timer
}

// linearMax: queues up to this long are searched instead of indexed.
const linearMax = 32

// push queues f under c.mu, replacing a queued frame of the same entity
// (it reports whether it did). The replaced frame's slot is left nil and
// f goes to the end, so frames still leave in seq order.
func (c *conn) push(f *frame) (coalesced bool) {
	if f.ent != 0 {
		if i := c.find(f.ent); i >= 0 {
			c.q[i] = nil
			c.live--
			coalesced = true
		}
	}
	c.q = append(c.q, f)
	c.live++
	switch {
	case c.indexed:
		if f.ent != 0 {
			c.idx[f.ent] = int32(len(c.q) - 1)
		}
	case len(c.q) > linearMax:
		c.reindex()
	}
	if len(c.q) > 2*c.live+linearMax {
		c.compact()
	}
	return coalesced
}

func (c *conn) find(ent uint32) int {
	if c.indexed {
		if i, ok := c.idx[ent]; ok {
			return int(i)
		}
		return -1
	}
	for i := len(c.q) - 1; i >= 0; i-- {
		if f := c.q[i]; f != nil && f.ent == ent {
			return i
		}
	}
	return -1
}

func (c *conn) reindex() {
	if c.idx == nil {
		c.idx = make(map[uint32]int32, 4*linearMax)
	}
	clear(c.idx)
	for i, f := range c.q {
		if f != nil && f.ent != 0 {
			c.idx[f.ent] = int32(i)
		}
	}
	c.indexed = true
}

func (c *conn) compact() {
	j := 0
	for _, f := range c.q {
		if f != nil {
			c.q[j] = f
			j++
		}
	}
	clear(c.q[j:])
	c.q = c.q[:j]
	if c.indexed {
		c.reindex()
	}
}

// dropQueued empties the queue, under c.mu.
func (c *conn) dropQueued() {
	clear(c.q)
	c.q = c.q[:0]
	c.live = 0
	if c.indexed {
		clear(c.idx)
		c.indexed = false
	}
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pushCtl queues a reply from the reader (pong, renewed, hello).
func (c *conn) pushCtl(b []byte) {
	c.mu.Lock()
	if c.closing == nil {
		c.push(&frame{b: b, at: c.h.now(), msgs: 1})
	}
	c.mu.Unlock()
	c.signal()
}

// closeWith asks the writer to send a close frame and stop; flush sends
// what is queued first. The first call wins.
func (c *conn) closeWith(code int, text, reason string, flush bool) {
	c.mu.Lock()
	if c.closing == nil {
		c.closing = closeFrame(code, text)
		c.reason = reason
		if !flush {
			c.dropQueued()
		}
	}
	c.mu.Unlock()
	c.signal()
}

// fail drops the connection without a close frame (the stream may be in
// the middle of a frame).
func (c *conn) fail(reason string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	if c.closing == nil {
		c.closing = []byte{}
	}
	c.mu.Unlock()
	c.nc.Close()
}

// extendRead pushes the read deadline out, unless a close is under way
// (the writer then sets a short one).
func (c *conn) extendRead() {
	c.mu.Lock()
	if c.closing == nil {
		c.nc.SetReadDeadline(time.Now().Add(2*c.h.cfg.PingInterval + 10*time.Second))
	}
	c.mu.Unlock()
}

func (c *conn) setExpiry(exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.expiry = time.AfterFunc(time.Until(exp), func() {
		c.closeWith(CloseTokenExpired, "token expired", "expired", false)
	})
}

// isTimeout reports a deadline error, also as gorilla reports it (its own
// net.Error, not wrapping os.ErrDeadlineExceeded).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// writeLoop writes everything queued in one socket write per wake-up
// (several frames, one writev), until the connection ends or a close frame
// has gone out.
func (c *conn) writeLoop() {
	h := c.h
	for {
		ending := false
		select {
		case <-c.wake:
		case <-c.dead:
			// The reader is gone; a close frame still queued (4001 after
			// the auth timeout, say) is worth one last try.
			ending = true
		}
		// Batching: at most one write per WriteInterval, so that under a
		// high change rate each write carries several frames (one
		// syscall per frame would cost more than the rest of the fan-out).
		// A client that gets a change after a quiet spell gets it at once.
		if d := h.cfg.WriteInterval - time.Since(c.lastWrite); !ending && d > 0 {
			if c.timer == nil {
				c.timer = time.NewTimer(d)
			} else {
				c.timer.Reset(d)
			}
			select {
			case <-c.timer.C:
			case <-c.dead:
				ending = true
			}
		}
		c.mu.Lock()
		q := c.q
		c.q, c.spare = c.spare, nil
		c.live = 0
		if c.indexed {
			clear(c.idx)
			c.indexed = false
		}
		cf := c.closing
		c.mu.Unlock()

		if ending {
			if len(cf) > 0 {
				c.nc.SetWriteDeadline(time.Now().Add(h.cfg.CloseWait))
				c.nc.Write(cf)
			}
			return
		}
		iov := c.iov[:0]
		msgs, oldest := 0, int64(math.MaxInt64)
		for _, f := range q {
			if f == nil {
				continue
			}
			iov = append(iov, f.b)
			iov = append(iov, f.more...)
			msgs += f.msgs
			oldest = min(oldest, f.at)
		}
		if len(cf) > 0 {
			iov = append(iov, cf)
		}
		var n int64
		var err error
		if len(iov) > 0 {
			c.lastWrite = time.Now()
			c.nc.SetWriteDeadline(c.lastWrite.Add(h.cfg.SlowTimeout))
			c.bufs = iov
			n, err = c.nc.writeBuffers(&c.bufs)
		}
		clear(iov)
		c.iov = iov[:0]
		clear(q)
		c.mu.Lock()
		if c.spare == nil {
			c.spare = q[:0]
		}
		c.mu.Unlock()
		h.m.sent(msgs, n)
		if err != nil {
			if isTimeout(err) {
				h.log.Warn("ws client too slow: dropped", "user", c.user.Username, "remote", c.nc.RemoteAddr().String())
				c.fail("slow")
			} else {
				c.fail("write_error")
			}
			return
		}
		if cf != nil {
			// Wait for the client's close reply, but not for long.
			c.mu.Lock()
			c.closing = []byte{} // sent: nothing left for the ending pass
			c.mu.Unlock()
			c.nc.SetReadDeadline(time.Now().Add(h.cfg.CloseWait))
			return
		}
		if msgs > 0 && h.now()-oldest > int64(h.cfg.SlowTimeout) {
			h.log.Warn("ws client too slow: closing", "user", c.user.Username, "remote", c.nc.RemoteAddr().String(),
				"lag_ms", (h.now()-oldest)/1e6)
			c.closeWith(CloseTooSlow, "too slow", "slow", false)
		}
	}
}

// clientMsg is any message a client sends.
type clientMsg struct {
	Op     string   `json:"op"`
	Token  string   `json:"token"`
	Topics []string `json:"topics"`
	Since  *uint64  `json:"since"`
	Epoch  string   `json:"epoch"`
}

var errBadMessage = errors.New("ws: message is not a JSON object with an op")

func (c *conn) read() (clientMsg, error) {
	var m clientMsg
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		return m, err
	}
	if typ != websocket.TextMessage || json.Unmarshal(data, &m) != nil || m.Op == "" {
		return m, errBadMessage
	}
	return m, nil
}

// requestToken takes the token from "Authorization: Bearer" or ?token=.
func requestToken(r *http.Request) (string, bool) {
	if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return strings.TrimSpace(v[7:]), true
	}
	if t := r.URL.Query().Get("token"); t != "" {
		return t, true
	}
	return "", false
}

// ServeHTTP upgrades GET /ws and serves the client until it goes.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()

	token, hasToken := requestToken(r)
	hw := &hijackWriter{ResponseWriter: w}
	wsc, err := h.up.Upgrade(hw, r, nil)
	if err != nil {
		return // Upgrade has answered
	}
	c := &conn{h: h, ws: wsc, nc: hw.nc, wake: make(chan struct{}, 1), dead: make(chan struct{}), slot: -1}
	wsc.SetReadLimit(4096)
	wsc.SetPongHandler(func(string) error { c.extendRead(); return nil })
	wsc.SetCloseHandler(func(code int, _ string) error {
		// Echo the client's close unless we sent ours.
		c.mu.Lock()
		echo := c.closing == nil
		if echo {
			c.closing = []byte{}
			c.reason = "client"
		}
		c.mu.Unlock()
		if echo {
			if code == websocket.CloseNoStatusReceived {
				code = websocket.CloseNormalClosure
			}
			wsc.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		}
		return nil
	})
	h.mu.Lock()
	h.conns[c] = struct{}{}
	closed := h.closed
	h.mu.Unlock()
	h.m.clients.Inc()
	var wg sync.WaitGroup
	wg.Go(c.writeLoop)
	if closed {
		c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
	}

	joined := c.serve(token, hasToken)

	close(c.dead)
	wg.Wait()
	c.nc.Close()
	c.mu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	reason := c.reason
	c.mu.Unlock()
	if joined {
		h.send(ctlMsg{kind: ctlLeave, c: c})
	}
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.m.clients.Dec()
	if reason == "" {
		reason = "gone"
	}
	h.m.closed.WithLabelValues(reason).Inc()
}

// serve authenticates the client and reads its messages until the
// connection ends; it reports whether the client joined the hub.
func (c *conn) serve(token string, hasToken bool) (joined bool) {
	h := c.h
	// drain reads until the close reply or the deadline the writer sets.
	drain := func() bool {
		for {
			if _, _, err := c.ws.ReadMessage(); err != nil {
				return joined
			}
		}
	}
	if !hasToken {
		c.nc.SetReadDeadline(time.Now().Add(h.cfg.AuthTimeout))
		m, err := c.read()
		switch {
		case err == nil && m.Op == "auth" && m.Token != "":
			token = m.Token
		case err == nil || errors.Is(err, errBadMessage) || isTimeout(err):
			c.closeWith(CloseNoToken, `no token: send {"op":"auth","token":"..."} first`, "no_token", false)
			return drain()
		default:
			return false
		}
	}
	u, exp, err := h.auth.Authenticate(token)
	if err != nil {
		c.closeAuth(err)
		return drain()
	}
	c.user = u
	c.full = auth.ViewOf(u).Full()
	c.seesUnowned = auth.Allowed(u, auth.SeeCalls, "")
	c.setExpiry(exp)
	c.pushCtl(h.helloFrame(u, exp))
	if !h.send(ctlMsg{kind: ctlJoin, c: c}) {
		c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
		return drain()
	}
	joined = true
	for {
		c.extendRead()
		m, err := c.read()
		if errors.Is(err, errBadMessage) {
			c.closeWith(CloseProtocolError, "not a JSON message with an op", "protocol", false)
			continue
		}
		if err != nil {
			return joined
		}
		c.mu.Lock()
		closing := c.closing != nil
		c.mu.Unlock()
		if closing {
			continue // waiting for the close reply
		}
		switch m.Op {
		case "ping":
			c.pushCtl(pongBytes)
		case "subscribe":
			var topics uint8
			bad := ""
			for _, t := range m.Topics {
				bit, ok := topicNames[t]
				if !ok {
					bad = t
					break
				}
				topics |= bit
			}
			if bad != "" || len(m.Topics) == 0 {
				c.closeWith(CloseProtocolError, "unknown topic "+quote(bad)+" (known: extensions, queues, parkings, trunks, me, presence)", "protocol", false)
				continue
			}
			resume := m.Since != nil && m.Epoch == h.epoch
			var since uint64
			if resume {
				since = *m.Since
			}
			if !h.send(ctlMsg{kind: ctlSubscribe, c: c, topics: topics, since: since, resume: resume}) {
				c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
			}
		case "auth":
			c.renew(m.Token)
		default:
			c.closeWith(CloseProtocolError, "unknown op "+quote(m.Op), "protocol", false)
		}
	}
}

func quote(s string) string { return string(appendString(nil, s)) }

// closeAuth closes for a token Authenticate refused.
func (c *conn) closeAuth(err error) {
	if errors.Is(err, auth.ErrTokenExpired) {
		c.closeWith(CloseTokenExpired, "token expired", "expired", false)
		return
	}
	c.closeWith(CloseAuthFailed, "authentication failed", "auth_failed", false)
}

// renew replaces the token of an authenticated connection.
func (c *conn) renew(token string) {
	u, exp, err := c.h.auth.Authenticate(token)
	if err != nil {
		c.closeAuth(err)
		return
	}
	if u.Username != c.user.Username {
		c.closeWith(CloseAuthFailed, "token of another user", "auth_failed", false)
		return
	}
	c.setExpiry(exp)
	b := newPayload(48)
	b = append(b, `{"op":"renewed","expiresAt":`...)
	b = appendInt(b, exp.UnixMilli())
	b = append(b, '}')
	c.pushCtl(finish(b, opText))
}

func (h *Hub) helloFrame(u *auth.User, exp time.Time) []byte {
	b := newPayload(256)
	b = append(b, `{"op":"hello","version":1,"epoch":`...)
	b = appendString(b, h.epoch)
	b = append(b, `,"expiresAt":`...)
	b = appendInt(b, exp.UnixMilli())
	b = append(b, `,"user":{"username":`...)
	b = appendString(b, u.Username)
	b = append(b, `,"name":`...)
	b = appendString(b, u.Name)
	b = append(b, `,"role":`...)
	b = appendString(b, u.Role.String())
	b = append(b, `,"endpoints":`...)
	b = appendStrings(b, u.Endpoints)
	b = append(b, `,"seesAllCalls":`...)
	if auth.ViewOf(u).Full() {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, "}}"...)
	return finish(b, opText)
}

// lockedConn serialises writes: the hub's writer and gorilla's control
// replies (pong, close echo, protocol-error close) share the socket, and
// each write holds whole frames.
type lockedConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte // writeBuffers' copy buffer when the conn has no writev
}

func (c *lockedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

// writeBuffers writes b with one writev on a TCP connection. Any other
// net.Conn (a listener's wrapper, TLS) would get one Write per buffer from
// net.Buffers, so the buffers are copied into one write instead.
func (c *lockedConn) writeBuffers(b *net.Buffers) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.Conn.(*net.TCPConn); ok {
		return b.WriteTo(c.Conn)
	}
	buf := c.buf[:0]
	for _, p := range *b {
		buf = append(buf, p...)
	}
	n, err := c.Conn.Write(buf)
	if cap(buf) <= 256<<10 {
		c.buf = buf[:0]
	} else {
		c.buf = nil // a snapshot: do not keep that much per client
	}
	return int64(n), err
}

// hijackWriter hands gorilla a lockedConn at the hijack.
type hijackWriter struct {
	http.ResponseWriter
	nc *lockedConn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.nc = &lockedConn{Conn: c}
	return w.nc, brw, nil
}
