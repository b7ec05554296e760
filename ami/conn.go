package ami

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// conn is one live connection.
type conn struct {
	nc net.Conn

	wmu sync.Mutex // serialises writes
	bw  *bufio.Writer

	mu      sync.Mutex // guards pending and err
	pending map[string]*call
	err     error         // why the connection ended; set once
	done    chan struct{} // closed when the connection ends
}

// call is one action waiting for its answer.
type call struct {
	name    string
	resp    Response
	gotResp bool          // the Response frame arrived; now collecting Items
	ch      chan struct{} // closed when resp is complete
}

// fail ends the connection with err (the first reason wins) and closes it,
// which unblocks the reader.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = err
		close(cn.done)
	}
	cn.mu.Unlock()
	cn.nc.Close()
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	if c.cfg.Dial != nil {
		return c.cfg.Dial(ctx, c.cfg.Addr)
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	if c.cfg.TLS != nil {
		td := &tls.Dialer{NetDialer: d, Config: c.cfg.TLS}
		return td.DialContext(ctx, "tcp", c.cfg.Addr)
	}
	return d.DialContext(ctx, "tcp", c.cfg.Addr)
}

// recordingReader copies what it reads to w.
type recordingReader struct {
	r   io.Reader
	w   io.Writer
	log *slog.Logger
	bad bool // a write failed; logged once
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if n > 0 && !rr.bad {
		if _, werr := rr.w.Write(p[:n]); werr != nil {
			rr.bad = true
			rr.log.Error("ami recording failed", "err", werr)
		}
	}
	return n, err
}

// runConn runs one connection from dial to close. loggedIn says whether it
// got past login (and so sent LinkUp and LinkDown).
func (c *Client) runConn(ctx context.Context) (loggedIn bool, err error) {
	nc, err := c.dial(ctx)
	if err != nil {
		c.stats.failures.Add(1)
		return false, fmt.Errorf("ami: dial: %w", err)
	}
	defer nc.Close()
	var src io.Reader = nc
	if c.cfg.Record != nil {
		if nr, ok := c.cfg.Record.(interface{ NewConn() error }); ok {
			if err := nr.NewConn(); err != nil {
				c.log.Error("ami recording failed", "err", err)
			}
		}
		src = &recordingReader{r: nc, w: c.cfg.Record, log: c.log}
	}
	// One bufio.Reader for the whole connection: the login response and
	// FullyBooted share a TCP read, and whatever follows the response must
	// stay buffered for the read loop.
	rc := c.cfg.Reader
	if rc.OnJunk == nil {
		rc.OnJunk = c.junk.note
	}
	defer c.junk.flush()
	r := NewReader(bufio.NewReaderSize(src, 64<<10), rc)
	cn := &conn{nc: nc, bw: bufio.NewWriterSize(nc, 8<<10), pending: map[string]*call{}, done: make(chan struct{})}

	// Let ctx interrupt the banner and login exchange.
	stopWatch := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	banner, err := c.login(cn, r)
	stopWatch()
	if err != nil {
		c.stats.failures.Add(1)
		var ae *ActionError
		if errors.As(err, &ae) {
			c.log.Error("ami login refused", "addr", c.cfg.Addr, "user", c.cfg.Username, "err", err)
		}
		return false, err
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	c.extendIdle(cn)

	if c.stats.connects.Add(1) > 1 {
		c.stats.reconnects.Add(1)
	}
	c.log.Info("ami connected", "addr", c.cfg.Addr, "banner", banner)
	c.mu.Lock()
	c.cur = cn // before LinkUp, so a consumer may Do at once
	c.mu.Unlock()
	c.push(Event{Link: LinkUp}, true)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned: ends when cn.done closes, waited for below
		defer wg.Done()
		c.keepAlive(ctx, cn)
	}()

	err = c.readLoop(cn, r)
	if IsTimeout(err) && c.cfg.PingInterval > 0 {
		c.stats.pingFails.Add(1)
		c.log.Warn("ami read idle: dropping connection", "idle", c.idleTimeout())
		err = fmt.Errorf("ami: %w (%v)", errReadIdle, c.idleTimeout())
	}
	cn.fail(err)

	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
	wg.Wait()
	c.push(Event{Link: LinkDown}, true)
	cn.mu.Lock()
	err = cn.err
	cn.mu.Unlock()
	return true, err
}

// login reads the banner and, if it is a manager's, logs in, reading frames sequentially from r
// (nothing else reads yet). The read deadline bounds the whole exchange.
func (c *Client) login(cn *conn, r *Reader) (string, error) {
	cn.nc.SetDeadline(time.Now().Add(c.cfg.ActionTimeout))
	banner, err := r.ReadBanner()
	if err != nil {
		return "", fmt.Errorf("ami: login: %w", err)
	}
	if !strings.Contains(banner, "Call Manager") {
		return "", fmt.Errorf("ami: login: banner %.80q: %w", banner, ErrNotManager)
	}
	return banner, c.authenticate(cn, r)
}

// ErrNotManager: the peer's first line is not an Asterisk manager's
// banner ("Asterisk Call Manager/..."): it is not sent the credentials.
var ErrNotManager = errors.New("the peer is not an Asterisk manager")

// authenticate sends Login (after Challenge with MD5) and reads its
// answer: an *ActionError when the manager refuses it.
func (c *Client) authenticate(cn *conn, r *Reader) error {
	login := NewAction(ActionLogin, "Username", c.cfg.Username)
	if c.cfg.MD5 {
		resp, err := c.exchange(cn, r, NewAction(ActionChallenge, "AuthType", "MD5"))
		if err != nil {
			return fmt.Errorf("ami: login: %w", err)
		}
		sum := md5.Sum([]byte(resp.Get("Challenge") + c.cfg.Secret))
		login = login.Add("AuthType", "md5").Add("Key", hex.EncodeToString(sum[:]))
	} else {
		login = login.Add("Secret", c.cfg.Secret)
	}
	if _, err := c.exchange(cn, r, login.Add("Events", c.cfg.Events)); err != nil {
		return fmt.Errorf("ami: login: %w", err)
	}
	return nil
}

// exchange writes one action and reads frames until its response. Frames
// before it (there should be none before login) are dropped.
func (c *Client) exchange(cn *conn, r *Reader, m Message) (Message, error) {
	id := c.nextID()
	m = m.Add("ActionID", id)
	if err := c.write(cn, m); err != nil {
		return Message{}, err
	}
	for {
		resp, err := r.ReadMessage()
		if err != nil {
			return Message{}, err
		}
		if resp.Kind() != KindResponse || resp.ActionID() != id {
			c.log.Debug("ami frame before login dropped", "frame", resp.String())
			continue
		}
		if strings.EqualFold(resp.Response(), "Error") {
			return resp, &ActionError{Action: m.Action(), Message: resp.Get("Message")}
		}
		return resp, nil
	}
}

func (c *Client) nextID() string {
	return c.prefix + "-" + strconv.FormatUint(c.seq.Add(1), 10)
}

// write sends m as one frame and flushes. Validation happens before any
// byte is written.
func (c *Client) write(cn *conn, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	cn.nc.SetWriteDeadline(time.Now().Add(c.cfg.ActionTimeout))
	if err := WriteMessage(cn.bw, m); err != nil {
		return err
	}
	return cn.bw.Flush()
}

// readLoop reads frames and routes them: answers to pending actions go to
// their callers, everything else to the queue. It never blocks on anything
// but the socket.
func (c *Client) readLoop(cn *conn, r *Reader) error {
	var last ReaderStats
	for {
		m, err := r.ReadMessage()
		st := r.Stats()
		c.stats.garbage.Add(st.Garbage - last.Garbage)
		c.stats.oversized.Add(st.Oversized - last.Oversized)
		last = st
		if err != nil {
			return err
		}
		c.stats.messages.Add(1)
		if c.route(cn, m) {
			continue
		}
		if m.Kind() == KindUnknown {
			// Neither Event nor Response: nothing downstream can use it.
			c.stats.headerless.Add(1)
			c.junk.note(JunkHeaderless, []byte(m.String()))
			continue
		}
		if !c.push(Event{Msg: m}, false) {
			c.stats.overflows.Add(1)
			c.log.Warn("ami queue overflow: dropping connection", "max_queue", c.cfg.MaxQueue)
			return errOverflow
		}
	}
}

// route hands m to the Do waiting for it and reports whether it did.
func (c *Client) route(cn *conn, m Message) bool {
	id := m.ActionID()
	if id == "" {
		return false
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cl := cn.pending[id]
	if cl == nil {
		return false
	}
	switch {
	case !cl.gotResp && m.Kind() == KindResponse:
		cl.resp.Message = m
		cl.gotResp = true
		if !strings.EqualFold(m.Get("EventList"), "start") {
			delete(cn.pending, id)
			close(cl.ch)
		}
		return true
	case cl.gotResp && m.Kind() == KindEvent:
		cl.resp.Items = append(cl.resp.Items, m)
		if strings.EqualFold(m.Get("EventList"), "Complete") {
			delete(cn.pending, id)
			close(cl.ch)
		}
		return true
	}
	return false
}
