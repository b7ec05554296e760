package ws

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// ServeHTTP upgrades GET /ws and returns: the connection is then served
// by a goroutine of the hub's (Close waits for it), so that what net/http
// keeps for a request while its handler runs (about 10 KiB of buffers and
// a grown stack) is let go for the connection's whole life.
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

	token, hasToken := requestToken(r)
	hw := &hijackWriter{ResponseWriter: w}
	// Gorilla's Conn is not kept: frames are read and written by this
	// package, on hw.nc.
	if _, err := h.up.Upgrade(hw, r, nil); err != nil {
		h.wg.Done()
		return // Upgrade has answered
	}
	c := &conn{h: h, nc: hw.nc, raw: rawConn(hw.nc.Conn), slot: -1, heard: h.now(),
		budget: newBucket(h.cfg.ClientRate, float64(h.cfg.ClientBurst), h.now()),
		wid:    uint8(h.nwid.Add(1) % uint32(len(h.writers.ws)))}
	go c.run(token, hasToken)
}

// run serves an upgraded connection: it authenticates the client and
// reads its messages until the connection parks (park.go) or ends.
func (c *conn) run(token string, hasToken bool) {
	h := c.h
	h.mu.Lock()
	h.conns[c] = struct{}{}
	closed := h.closed
	h.mu.Unlock()
	h.m.clients.Inc()
	if closed {
		c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
	}
	if !c.authenticate(token, hasToken) {
		c.finish(false)
		return
	}
	if !c.serveMessages(false) {
		c.finish(true)
	}
}

// finish cleans up after the connection's last reader, joined telling
// whether the client joined the hub.
func (c *conn) finish(joined bool) {
	h := c.h
	defer h.wg.Done()
	c.mu.Lock()
	c.ended = true
	cf := c.closing
	if len(cf) > 0 {
		c.closing = []byte{}
	}
	c.mu.Unlock()
	c.flushers.Wait()
	if len(cf) > 0 {
		// A close frame no flusher sent (4001 after the auth timeout,
		// say) is worth one last try.
		c.nc.SetWriteDeadline(time.Now().Add(h.cfg.CloseWait))
		c.nc.Write(cf)
	}
	c.forgetPolled()
	c.nc.Close()
	c.unwatchRevoke()
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

// subscribeCost is what a subscribe takes from the client's budget, in
// messages: it costs the hub a snapshot or a replay, not a reply.
const subscribeCost = 5

// spend charges what the client sent (cost messages' worth) to its
// budget; past the budget the client is closed with 4008, and false is
// returned.
func (c *conn) spend(cost float64) bool {
	if c.budget.spend(c.h.now(), cost) {
		return true
	}
	c.mu.Lock()
	first := c.closing == nil
	c.mu.Unlock()
	if first && c.user != nil {
		c.h.boxed.flooded(c.user.Username, time.Now())
	}
	c.closeWith(CloseTooMany, "too many messages: at most "+strconv.FormatFloat(c.h.cfg.ClientRate, 'g', 4, 64)+
		" a second on average", "flood", false)
	return false
}

// clientMsg is any message a client sends.
type clientMsg struct {
	Op     string   `json:"op"`
	Token  string   `json:"token"`
	Topics []string `json:"topics"`
	PBXs   []string `json:"pbxs"`
	Since  *uint64  `json:"since"`
	Epoch  string   `json:"epoch"`
	Deltas []string `json:"deltas"`
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

// authenticate authenticates the client and joins it to the hub; false
// when it did not join (then the connection is closing, and drained).
func (c *conn) authenticate(token string, hasToken bool) bool {
	h := c.h
	if !hasToken {
		c.nc.SetReadDeadline(time.Now().Add(h.cfg.AuthTimeout))
		m, err := c.read()
		// A ping or pong before the auth message is answered (control
		// charges it) and skipped, within AuthTimeout.
		for errors.Is(err, errNoMessage) {
			m, err = c.read()
		}
		c.spend(1)
		switch {
		case err == nil && m.Op == "auth" && m.Token != "":
			token = m.Token
		case err == nil || errors.Is(err, errBadMessage) || errors.Is(err, errClosing) || isTimeout(err):
			c.closeWith(CloseNoToken, `no token: send {"op":"auth","token":"..."} first`, "no_token", false)
			c.drain()
			return false
		default:
			return false
		}
	}
	u, exp, err := h.auth.Authenticate(token)
	if err != nil {
		c.closeAuth(err)
		c.drain()
		return false
	}
	c.user = u
	if d := h.boxed.left(u.Username, time.Now()); d > 0 {
		c.closeWith(CloseTooMany, boxedReason(d), "flood", false)
		c.drain()
		return false
	}
	c.full = auth.ViewOf(u).Full()
	c.seesUnowned = auth.Allowed(u, auth.SeeCalls, "")
	c.setExpiry(exp)
	c.watchRevoke(token)
	c.pushReply(h.helloFrame(u, exp), 0)
	// Heard now: the read deadline becomes silentFor's (AuthTimeout's
	// until then), and extendRead takes it on from here.
	c.hear(h.now())
	if !h.send(ctlMsg{kind: ctlJoin, c: c}) {
		c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
		c.drain()
		return false
	}
	return true
}

// serveMessages reads and serves a joined client's messages until the
// connection parks between two of them (true) or ends (false), after
// draining it when it closes. readFirst: the poller woke it (the client
// sent something); else it parks before reading.
func (c *conn) serveMessages(readFirst bool) bool {
	for first := true; ; first = false {
		if c.isClosing() {
			// Nothing more is served: wait for the close reply (the
			// flusher sets a short deadline once the close is out).
			c.drain()
			return false
		}
		if (!first || !readFirst) && c.park() {
			return true
		}
		c.extendRead()
		m, err := c.read()
		if errors.Is(err, errClosing) || errors.Is(err, errNoMessage) {
			continue
		}
		if err != nil && !errors.Is(err, errBadMessage) {
			return false
		}
		cost := 1.0
		if err == nil && m.Op == "subscribe" {
			cost = subscribeCost
		}
		if !c.spend(cost) {
			continue
		}
		if err != nil {
			c.closeWith(CloseProtocolError, "not a JSON message with an op", "protocol", false)
			continue
		}
		c.handle(m)
	}
}

// handle serves one message of an authenticated client.
func (c *conn) handle(m clientMsg) {
	h := c.h
	switch m.Op {
	case "ping":
		c.pushReply(pongBytes, entPong)
	case "subscribe":
		var topics uint8
		for _, t := range m.Topics {
			bit, ok := topicNames[t]
			if !ok {
				c.closeWith(CloseProtocolError, "unknown topic "+quote(t)+" (known: extensions, queues, parkings, trunks, me, presence)", "protocol", false)
				return
			}
			topics |= bit
		}
		if len(m.Topics) == 0 {
			c.closeWith(CloseProtocolError, "no topics (known: extensions, queues, parkings, trunks, me, presence)", "protocol", false)
			return
		}
		if err := checkPBXs(m.PBXs); err != nil {
			c.closeWith(CloseProtocolError, err.Error(), "protocol", false)
			return
		}
		req := subReq{topics: topics, pbxs: m.PBXs}
		for _, d := range m.Deltas {
			switch d {
			case "trunks":
				req.deltas |= deltaTrunks
			case "queues":
				req.deltas |= deltaQueues
			case "status":
				req.statusDeltas = true
			default:
				c.closeWith(CloseProtocolError, "deltas: "+quote(d)+" has none (known: trunks, queues, status)", "protocol", false)
				return
			}
		}
		if m.Since != nil && m.Epoch == h.epoch {
			req.since, req.resume = *m.Since, true
		}
		// The latest request replaces one the hub has not taken yet, so a
		// client has at most one request on its way to the hub.
		c.mu.Lock()
		send := c.sub == nil
		c.sub = &req
		c.mu.Unlock()
		if send && !h.send(ctlMsg{kind: ctlSubscribe, c: c}) {
			c.closeWith(CloseGoingAway, "server shutting down", "shutdown", false)
		}
	case "auth":
		c.renew(m.Token)
	default:
		c.closeWith(CloseProtocolError, "unknown op "+quote(m.Op), "protocol", false)
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
	c.watchRevoke(token)
	b := newPayload(48)
	b = append(b, `{"op":"renewed","expiresAt":`...)
	b = appendInt(b, exp.UnixMilli())
	b = append(b, '}')
	c.pushReply(finish(b, opText), entRenewed)
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
